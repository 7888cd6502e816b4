//! Many Pi sessions in one database (issue 28 item 8): `tree`, `list` and `usage` put the
//! newest session first; `--session ID|NAME|latest` narrows `show`, `events`, `tree`, `list`
//! and `usage` to one session (a root session's id, a child serve's session id, an 8+ character
//! prefix, the name Pi records, the first message, or `latest`); a selector that matches
//! nothing or several sessions, and a reference that names threads in several sessions, are
//! errors that list the sessions by name and start time and say to pass `--session`.

use crate::support::serve_client;

use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};
use serve_client::{Scripted, Serve};

const SCRIPT: &str = r#"{"turns": [{"steps": [{"delay_ms": 60000}, {"text": "late"}]}]}"#;

/// Three root sessions, oldest first: one Pi named (`session_info`, renamed once: the latest
/// wins), one known by its first message, one without a session file.
const ALPHA: &str = "0195aaaa-1111-7000-8000-00000000000a";
const BETA: &str = "0195bbbb-2222-7000-8000-00000000000b";
const GAMMA: &str = "0195cccc-3333-7000-8000-00000000000c";

struct World {
    base: Scripted,
}

impl World {
    fn new() -> World {
        let base = Scripted::new("sessions");
        base.script("script", SCRIPT);
        World { base }
    }

    /// A serve for `session`, with a session file holding `entries` after the header when
    /// given; `scope` makes it the own serve of that thread (path, id) at depth 1.
    fn serve(
        &self,
        session: &str,
        entries: Option<Vec<Value>>,
        scope: Option<(&str, &str)>,
    ) -> Serve {
        let args = match entries {
            Some(entries) => {
                let mut lines = vec![
                    json!({"type":"session","version":3,"id":session,"timestamp":"2026-12-01T10:00:00.000Z","cwd":self.base.root}),
                ];
                lines.extend(entries);
                let file = self.base.session_file(&format!("{session}.jsonl"), &lines);
                vec!["--session-file".into(), file.display().to_string()]
            }
            None => vec!["--session-id".into(), session.into()],
        };
        let env = match scope {
            Some((path, id)) => vec![
                ("PI_THREADS_PATH", path),
                ("PI_THREADS_SELF_ID", id),
                ("PI_THREADS_DEPTH", "1"),
            ],
            None => vec![],
        };
        self.base.serve("script", args, &env)
    }

    fn run(&self, args: &[&str]) -> Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(&self.base.db)
            .args(args)
            .output()
            .unwrap()
    }

    fn cli(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "threadbase {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The stderr of a command that must fail with exit status 2 and `code`.
    fn fails(&self, args: &[&str], code: &str) -> String {
        let o = self.run(args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(2), "threadbase {args:?}: {err}");
        assert!(err.contains(&format!("error[{code}]")), "{args:?}: {err}");
        assert!(err.contains("Repair:"), "{args:?}: {err}");
        err
    }

    fn thread_at(&self, path: &str, manager_session: &str) -> (String, String) {
        let conn = crate::support::sql::Conn::open(&self.base.db).unwrap();
        conn.query_row(
            "SELECT t.id, t.session_id FROM threads t JOIN managers m ON m.id = t.manager_id
             WHERE t.path = ?1 AND m.session_id = ?2",
            [path, manager_session],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    }
}

fn start(s: &mut Serve, task: &str) {
    let r =
        s.thread(json!({"action": "start", "prompt": format!("work on {task}"), "taskName": task}));
    assert_eq!(r["details"]["kind"], "started", "{r}");
}

fn user(text: &str) -> Value {
    json!({"type":"message","id":"u0000001","parentId":null,"timestamp":"2026-12-01T10:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":text}],"timestamp":1}})
}

fn named(name: &str, id: &str) -> Value {
    json!({"type":"session_info","id":id,"parentId":"u0000001","timestamp":"2026-12-01T10:00:02.000Z","name":name})
}

/// Where each needle first appears in `text` (panics when one is missing).
fn positions(text: &str, needles: &[&str]) -> Vec<usize> {
    needles
        .iter()
        .map(|n| {
            text.find(n)
                .unwrap_or_else(|| panic!("{n:?} missing in:\n{text}"))
        })
        .collect()
}

fn ascending(v: &[usize]) -> bool {
    v.windows(2).all(|w| w[0] < w[1])
}

#[test]
fn many_sessions_read_newest_first_and_session_picks_one() {
    let w = World::new();
    let pause = || std::thread::sleep(Duration::from_millis(30));
    let mut alpha = w.serve(
        ALPHA,
        Some(vec![
            user("a long first message"),
            named("Old name", "n0000001"),
            named("Alpha work", "n0000002"),
        ]),
        None,
    );
    start(&mut alpha, "quick");
    start(&mut alpha, "lead");
    let (lead_id, lead_session) = w.thread_at("/root/lead", ALPHA);
    let mut lead = w.serve(&lead_session, None, Some(("/root/lead", &lead_id)));
    start(&mut lead, "deep");
    pause();
    let mut beta = w.serve(BETA, Some(vec![user("Beta errand")]), None);
    start(&mut beta, "quick");
    pause();
    let mut gamma = w.serve(GAMMA, None, None);
    start(&mut gamma, "quick");
    let (gamma_quick, _) = w.thread_at("/root/quick", GAMMA);
    let (alpha_quick, _) = w.thread_at("/root/quick", ALPHA);

    // Newest session first in tree, list and usage; within a session, tree order.
    let tree = w.cli(&["tree"]);
    let headings = [GAMMA, BETA, ALPHA].map(|s| format!("session {s}"));
    let order = positions(&tree, &headings.each_ref().map(String::as_str));
    assert!(ascending(&order), "newest first:\n{tree}");
    assert!(
        tree.contains("\"Alpha work\""),
        "the latest name wins:\n{tree}"
    );
    assert!(!tree.contains("Old name"), "{tree}");
    assert!(
        ascending(&positions(&tree, &["/root/lead  ", "/root/lead/deep"])),
        "{tree}"
    );
    let list = w.cli(&["list"]);
    assert!(
        ascending(&positions(&list, &headings.each_ref().map(String::as_str))),
        "{list}"
    );
    let usage = w.cli(&["usage"]);
    let usage_heads = [GAMMA, BETA, ALPHA].map(|s| format!("tree of session {s}:"));
    assert!(
        ascending(&positions(
            &usage,
            &usage_heads.each_ref().map(String::as_str)
        )),
        "{usage}"
    );
    assert!(usage.contains("· \"Beta errand\" · started 20"), "{usage}");

    // One session by each spelling: latest, id, a child serve's session id, a prefix, the
    // name Pi records (case aside), the first message.
    let only = |args: &[&str], want: &str| {
        let text = w.cli(args);
        for s in [ALPHA, BETA, GAMMA] {
            assert_eq!(
                text.contains(&format!("session {s}")),
                s == want,
                "{args:?} shows {want} alone:\n{text}"
            );
        }
        text
    };
    only(&["tree", "--session", "latest"], GAMMA);
    only(&["tree", "--latest"], GAMMA);
    only(&["list", "--session", "latest"], GAMMA);
    only(&["tree", "--session", BETA], BETA);
    let lead_tree = only(&["tree", "--session", &lead_session], ALPHA);
    assert!(lead_tree.contains("/root/lead/deep"), "{lead_tree}");
    only(&["tree", "--session", "0195aaaa"], ALPHA);
    only(&["list", "--session", "alpha WORK"], ALPHA);
    only(&["tree", "--session", "Beta errand"], BETA);
    let one = w.cli(&["usage", "--session", "Alpha work"]);
    assert_eq!(one.matches("tree of session").count(), 1, "{one}");
    assert!(
        one.contains(&format!("tree of session {ALPHA}: 3 threads")),
        "{one}"
    );
    let doc: Value =
        serde_json::from_str(&w.cli(&["tree", "--session", "latest", "--json"])).unwrap();
    assert_eq!(doc.as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc[0]["rootSession"], GAMMA);

    // A reference that names threads in several sessions: the candidates by session name and
    // start time, with path and id, and a Repair that says to pass --session.
    let err = w.fails(&["show", "quick"], "ambiguous_reference");
    assert!(err.contains("3 threads in 3 Pi sessions"), "{err}");
    for (id, session) in [(&alpha_quick, ALPHA), (&gamma_quick, GAMMA)] {
        assert!(
            err.contains(&format!("/root/quick (id: {id}) in session ")),
            "{err}"
        );
        assert!(err.contains(&format!("(id {session})")), "{err}");
    }
    assert!(err.contains("\"Alpha work\" started 20"), "{err}");
    assert!(err.contains("\"Beta errand\" started 20"), "{err}");
    assert!(err.contains("(unnamed) started 20"), "{err}");
    assert!(
        ascending(&positions(&err, &[GAMMA, BETA, ALPHA])),
        "newest session first:\n{err}"
    );
    assert!(err.contains("Repair: pass --session"), "{err}");
    assert!(!err.contains("manager:"), "not by manager UUID:\n{err}");

    // The same reference inside one session resolves.
    let shown = w.cli(&["show", "quick", "--session", "latest"]);
    assert!(shown.contains(&gamma_quick), "{shown}");
    let shown = w.cli(&["show", "/root/lead/deep"]);
    assert!(
        shown.contains("session      \"Alpha work\" started 20"),
        "show names the thread's Pi session:\n{shown}"
    );
    assert!(shown.contains(&format!("(id {ALPHA})")), "{shown}");
    let shown = w.cli(&["show", "/root/quick", "--session", "Alpha work", "--json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&shown).unwrap()["id"],
        alpha_quick.as_str()
    );
    let evs = w.cli(&["events", "quick", "--session", "0195bbbb"]);
    assert!(evs.starts_with("/root/quick ("), "{evs}");
    let matched = w.cli(&["events", "--match", "/root/**", "--session", "Alpha work"]);
    assert!(matched.contains(&alpha_quick), "{matched}");
    assert!(matched.contains("/root/lead/deep"), "{matched}");
    assert!(!matched.contains(&gamma_quick), "{matched}");
    let err = w.fails(
        &["show", "deep", "--session", "latest"],
        "unknown_reference",
    );
    assert!(err.contains("in session (unnamed) started"), "{err}");
    // --manager, the older spelling, still narrows to one serve's threads.
    let shown = w.cli(&["show", "quick", "--manager", GAMMA]);
    assert!(shown.contains(&gamma_quick), "{shown}");

    // A selector that matches no session, or several, lists them by name and start time.
    let err = w.fails(
        &["tree", "--session", "nothing like it"],
        "unknown_reference",
    );
    assert!(
        err.contains("No Pi session matches --session \"nothing like it\""),
        "{err}"
    );
    assert!(err.contains("\"Alpha work\" started 20"), "{err}");
    assert!(err.contains(&format!("(id {BETA})")), "{err}");
    assert!(
        err.contains("Repair: pass --session with a session id"),
        "{err}"
    );
    let err = w.fails(&["show", "quick", "--session", "0195"], "unknown_reference");
    assert!(
        err.contains("No Pi session matches"),
        "a prefix under 8 characters:\n{err}"
    );
    let err = w.fails(
        &["usage", "--session", "0195aaaa-9999"],
        "unknown_reference",
    );
    assert!(err.contains("Sessions, newest first"), "{err}");

    for s in [&mut lead, &mut alpha, &mut beta, &mut gamma] {
        s.close(Duration::from_secs(10));
    }
}

/// Two sessions whose ids share their first 8 characters: that prefix names both, and the
/// error lists both; a longer prefix names one.
#[test]
fn a_session_prefix_that_fits_several_sessions_is_ambiguous() {
    let w = World::new();
    let one = "0195dddd-0000-7000-8000-000000000001";
    let two = "0195dddd-0000-7000-8000-000000000002";
    let mut a = w.serve(
        one,
        Some(vec![user("First"), named("Same", "n0000001")]),
        None,
    );
    start(&mut a, "quick");
    std::thread::sleep(Duration::from_millis(30));
    let mut b = w.serve(
        two,
        Some(vec![user("Second"), named("Same", "n0000001")]),
        None,
    );
    start(&mut b, "quick");
    let err = w.fails(&["list", "--session", "0195dddd"], "ambiguous_reference");
    assert!(
        err.contains("--session \"0195dddd\" matches 2 Pi sessions"),
        "{err}"
    );
    assert!(err.contains("\"Same\" started 20"), "{err}");
    assert!(ascending(&positions(&err, &[two, one])), "{err}");
    // Two sessions with one name: the name is ambiguous too; an id picks one.
    let err = w.fails(&["tree", "--session", "same"], "ambiguous_reference");
    assert!(err.contains("matches 2 Pi sessions"), "{err}");
    let text = w.cli(&["tree", "--session", two]);
    assert!(text.contains(two) && !text.contains(one), "{text}");
    for s in [&mut a, &mut b] {
        s.close(Duration::from_secs(10));
    }
}
