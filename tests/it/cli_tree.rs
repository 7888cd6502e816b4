//! `threadbase tree` and `list` show one tree per root session: a child's own serve (its own
//! manager) has its threads nested under the child, indented, with state and exit kind; the
//! heading says where and when the session ran and its name; `--latest` keeps the newest tree.

use crate::support::serve_client;

use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};
use serve_client::{Scripted, Serve};

const SCRIPT: &str = r#"{"turns": [{"steps": [{"delay_ms": 60000}, {"text": "late"}]}]}"#;

struct World {
    base: Scripted,
}

impl World {
    fn new() -> World {
        let base = Scripted::new("tree");
        base.script("script", SCRIPT);
        World { base }
    }

    /// A serve for `session` (with a session file named `title` when given); `scope` makes
    /// it the own serve of that thread (path, id) at depth 1.
    fn serve(&self, session: &str, title: Option<&str>, scope: Option<(&str, &str)>) -> Serve {
        let args = match title {
            Some(title) => {
                let lines = [
                    json!({"type":"session","version":3,"id":session,"timestamp":"2026-12-01T10:00:00.000Z","cwd":self.base.root}),
                    json!({"type":"message","id":"u0000001","parentId":null,"timestamp":"2026-12-01T10:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":title}],"timestamp":1}}),
                ];
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

    fn cli(&self, args: &[&str]) -> String {
        let o: Output = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(&self.base.db)
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "threadbase {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn session_of(&self, path: &str) -> (String, String) {
        let conn = crate::support::sql::Conn::open(&self.base.db).unwrap();
        conn.query_row(
            "SELECT id, session_id FROM threads WHERE path = ?1",
            [path],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    }
}

fn start(s: &mut Serve, task: &str) -> Value {
    let r =
        s.thread(json!({"action": "start", "prompt": format!("work on {task}"), "taskName": task}));
    assert_eq!(r["details"]["kind"], "started", "{r}");
    r
}

fn line_with<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

#[test]
fn a_child_serves_threads_nest_under_the_child_in_one_tree() {
    let w = World::new();
    let mut root = w.serve("ses_root", Some("Plan the release"), None);
    start(&mut root, "lead");
    start(&mut root, "review");
    root.thread(json!({"action": "stop", "id": "review"}));
    let (lead_id, lead_session) = w.session_of("/root/lead");
    let mut lead = w.serve(&lead_session, None, Some(("/root/lead", &lead_id)));
    start(&mut lead, "docs_check");

    let text = w.cli(&["tree"]);
    let heading = line_with(&text, "session ses_root");
    assert!(heading.contains("\"Plan the release\""), "{heading}");
    assert!(
        heading.contains(&w.base.root.display().to_string()),
        "{heading}"
    );
    assert!(heading.contains("started 20"), "{heading}");
    assert!(heading.contains("3 threads"), "{heading}");
    assert!(
        !text.contains(&format!("session {lead_session}")),
        "the child's manager is not a tree of its own:\n{text}"
    );
    let lead_line = line_with(&text, "/root/lead  ");
    let docs_line = line_with(&text, "/root/lead/docs_check");
    assert!(indent(docs_line) > indent(lead_line), "{text}");
    assert!(docs_line.contains("[live/"), "{docs_line}");
    assert!(
        docs_line.contains("(started by /root/lead's own serve)"),
        "{docs_line}"
    );
    assert!(
        line_with(&text, "/root/review").contains("[closed/stopped]"),
        "the exit kind is shown:\n{text}"
    );
    // Tree order: a parent before its descendants.
    let at = |p: &str| text.find(p).unwrap();
    assert!(at("/root/lead  ") < at("/root/lead/docs_check"));
    assert!(at("/root/lead/docs_check") < at("/root/review"));

    let list = w.cli(&["list"]);
    assert!(
        list.contains("  /root/lead/docs_check"),
        "indented:\n{list}"
    );
    assert!(list.contains("closed/stopped"), "{list}");
    assert!(list.contains("3 threads (2 live, 1 closed)"), "{list}");

    let doc: Value = serde_json::from_str(&w.cli(&["tree", "--json"])).unwrap();
    assert_eq!(doc.as_array().unwrap().len(), 1, "{doc}");
    assert_eq!(doc[0]["rootSession"], "ses_root");
    assert_eq!(doc[0]["name"], "Plan the release");
    let docs = doc[0]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["path"] == "/root/lead/docs_check")
        .unwrap();
    assert_eq!(docs["level"], 2);
    assert_eq!(docs["root_session"], "ses_root");
    assert_eq!(docs["manager_session"], lead_session.as_str());

    // A second root session: two trees; --latest keeps the newer one.
    std::thread::sleep(Duration::from_millis(20));
    let mut other = w.serve("ses_other", None, None);
    start(&mut other, "spike");
    let text = w.cli(&["tree"]);
    assert!(
        text.contains("session ses_root") && text.contains("session ses_other"),
        "{text}"
    );
    let latest = w.cli(&["tree", "--latest"]);
    assert!(latest.contains("session ses_other"), "{latest}");
    assert!(!latest.contains("ses_root"), "{latest}");
    let latest = w.cli(&["list", "--latest"]);
    assert!(
        latest.contains("/root/spike") && !latest.contains("/root/lead"),
        "{latest}"
    );

    for s in [&mut lead, &mut root, &mut other] {
        s.close(Duration::from_secs(10));
    }
}
