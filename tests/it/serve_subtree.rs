//! Contract A over a whole subtree: every child Pi runs its own serve, so a grandchild lives
//! in its parent's manager, in another process. From the root session's serve, references,
//! `list parent`/`ancestor`, `poll` and `wait` reach it from the rows; `send`, `stop` and
//! `resume` are carried out by the serve that holds it (a `commands` row); once that serve is
//! gone the restore rules apply and the root's serve takes the thread over. `list` with no
//! filter stays the root's own threads. Real serves, real scripted children, one database.

use crate::support::common;
use crate::support::db_check;
use crate::support::serve_client;

use std::time::Duration;

use serde_json::{json, Value};
use serve_client::{Scripted, Serve};

/// Every child answers its first prompt after 1.5 s with a two-line answer, and later prompts
/// with `reply to <prompt>`. (At 200 ms, the checks before the subtree test's `wait` took
/// longer than the turn on a loaded machine, about 1 run in 10: the wait then found the thread
/// idle and sent no progress.)
const SCRIPT: &str = r#"{"turns": [{"steps": [{"delay_ms": 1500}, {"text": "first line\nsecond line"}]}],
  "default_reply": "reply to {prompt}"}"#;

struct World {
    base: Scripted,
}

impl World {
    fn new() -> World {
        let base = Scripted::new("subtree");
        base.script("script", SCRIPT);
        World { base }
    }

    /// The serve of `session`; `scope` makes it the own serve of that thread (path, id) at
    /// `depth`, as a child Pi's extension starts it.
    fn serve(&self, session: &str, scope: Option<(&str, &str, u32)>) -> Serve {
        self.serve_on(None, session, scope)
    }

    /// [`World::serve`] as host `host`, the first process of a PID namespace of its own (issue
    /// 33: each host's serve is pid 1, so the rows' pids collide on purpose).
    fn serve_on(
        &self,
        host: Option<&str>,
        session: &str,
        scope: Option<(&str, &str, u32)>,
    ) -> Serve {
        let depth;
        let mut env = vec![("PI_THREADS_MAX_DEPTH", "3")];
        if let Some((path, id, d)) = scope {
            depth = d.to_string();
            env.extend([
                ("PI_THREADS_PATH", path),
                ("PI_THREADS_SELF_ID", id),
                ("PI_THREADS_DEPTH", depth.as_str()),
                ("PI_THREADS_ROOT_SESSION_ID", "ses_root"),
            ]);
        }
        let args = vec!["--session-id".into(), session.into()];
        match host {
            None => self.base.serve("script", args, &env),
            Some(host) => {
                env.push(("THREADBASE_HOST_ID", host));
                let ns = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"];
                self.base.serve_under(&ns, "script", args, &env)
            }
        }
    }

    /// The own serve of the thread at `path` (its id and session from the rows).
    fn serve_of(&self, path: &str, depth: u32) -> Serve {
        let (id, session) = self.row(path);
        self.serve(&session, Some((path, &id, depth)))
    }

    fn row(&self, path: &str) -> (String, String) {
        self.conn()
            .query_row(
                "SELECT id, session_id FROM threads WHERE path = ?1",
                [path],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
    }

    fn owner_pid(&self, path: &str) -> i64 {
        self.conn()
            .query_row(
                "SELECT owner_pid FROM threads WHERE path = ?1",
                [path],
                |r| r.get(0),
            )
            .unwrap()
    }

    fn conn(&self) -> crate::support::sql::Conn {
        let c = crate::support::sql::Conn::open(&self.base.db).unwrap();
        c.busy_timeout(Duration::from_secs(10)).unwrap();
        c
    }
}

fn start(s: &mut Serve, task: &str) -> String {
    let r =
        s.thread(json!({"action": "start", "prompt": format!("work on {task}"), "taskName": task}));
    assert_eq!(r["details"]["kind"], "started", "{r}");
    r["details"]["snapshot"]["id"].as_str().unwrap().to_string()
}

fn snap(r: &Value) -> &Value {
    &r["details"]["snapshot"]
}

fn text(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap()
}

fn paths(r: &Value) -> Vec<String> {
    r["details"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["path"].as_str().unwrap().to_string())
        .collect()
}

fn wait_idle(s: &mut Serve, id: &str) -> Value {
    let r = s.thread(json!({"action": "wait", "id": id, "timeoutMs": 20000}));
    assert_eq!(r["details"]["timedOut"], false, "{r}");
    assert_eq!(snap(&r)["phase"], "idle", "{r}");
    r
}

/// From the root: a grandchild held by a child's own serve is found by every reference form,
/// listed under its parent and its ancestors, polled and waited on from its rows; its own
/// threads win over it, and two such descendants with one name are ambiguous.
#[test]
fn the_root_reads_its_whole_subtree_from_the_rows() {
    let w = World::new();
    let mut root = w.serve("ses_root", None);
    start(&mut root, "lead");
    start(&mut root, "review");
    let mut lead = w.serve_of("/root/lead", 1);
    let mut review = w.serve_of("/root/review", 1);
    let docs = start(&mut lead, "docs_check");
    start(&mut lead, "api_check");
    let review_docs = start(&mut review, "docs_check");

    // Every reference form reaches the grandchild; its canonical path is the full path.
    for reference in [
        "lead/docs_check",
        "/root/lead/docs_check",
        "root/lead/docs_check",
        docs.as_str(),
        " lead/docs_check ",
    ] {
        let r = root.thread(json!({"action": "poll", "id": reference}));
        assert_eq!(snap(&r)["id"], docs.as_str(), "{reference}: {r}");
        assert_eq!(snap(&r)["path"], "/root/lead/docs_check");
        assert_eq!(snap(&r)["parentPath"], "/root/lead");
        assert_eq!(snap(&r)["depth"], 2);
    }
    // A task name unique below: found; one held by two child serves: ambiguous, as the
    // contract words it.
    let r = root.thread(json!({"action": "poll", "id": "api_check"}));
    assert_eq!(snap(&r)["path"], "/root/lead/api_check");
    let e = root.thread_error(json!({"action": "poll", "id": "docs_check"}));
    assert_eq!(e["code"], "ambiguous_reference", "{e}");
    assert_eq!(
        e["message"],
        "Ambiguous thread reference \"docs_check\". Candidate paths: /root/lead/docs_check, /root/review/docs_check. Repair: use one of the candidate paths or a thread id instead."
    );
    let r = root.thread(json!({"action": "poll", "id": review_docs}));
    assert_eq!(snap(&r)["path"], "/root/review/docs_check");
    // Still unknown: the contract's text, listing the root's own threads.
    let e = root.thread_error(json!({"action": "poll", "id": "nowhere"}));
    assert_eq!(e["code"], "unknown_reference");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("Known threads: /root/lead (id: "),
        "{e}"
    );
    // The root's own thread always wins.
    let own_docs = start(&mut root, "docs_check");
    let r = root.thread(json!({"action": "poll", "id": "docs_check"}));
    assert_eq!(snap(&r)["id"], own_docs.as_str());
    // A child's serve does not reach up or sideways.
    let e = review.thread_error(json!({"action": "poll", "id": docs}));
    assert_eq!(e["code"], "unknown_reference", "{e}");

    // Lists: parent and ancestor reach into the children's managers, in path order; no
    // filter stays this manager's own threads.
    let r = root.thread(json!({"action": "list", "ancestor": "/root"}));
    assert_eq!(
        paths(&r),
        [
            "/root/docs_check",
            "/root/lead",
            "/root/lead/api_check",
            "/root/lead/docs_check",
            "/root/review",
            "/root/review/docs_check",
        ]
    );
    assert_eq!(r["details"]["count"], 6);
    assert_eq!(r["details"]["threads"], r["details"]["snapshots"]);
    assert!(
        text(&r).contains(" /root/lead/docs_check - live/"),
        "{}",
        text(&r)
    );
    let r = root.thread(json!({"action": "list"}));
    assert_eq!(
        paths(&r),
        ["/root/docs_check", "/root/lead", "/root/review"]
    );
    for parent in ["/root/lead", "lead", "root/lead"] {
        let r = root.thread(json!({"action": "list", "parent": parent}));
        assert_eq!(
            paths(&r),
            ["/root/lead/api_check", "/root/lead/docs_check"],
            "{parent}"
        );
    }
    let r = root.thread(json!({"action": "list", "parent": "."}));
    assert_eq!(
        paths(&r),
        ["/root/docs_check", "/root/lead", "/root/review"]
    );
    let r = root.thread(json!({"action": "list", "ancestor": "lead"}));
    assert_eq!(paths(&r), ["/root/lead/api_check", "/root/lead/docs_check"]);
    // State filters apply below too.
    lead.thread(json!({"action": "stop", "id": "api_check"}));
    let r = root.thread(json!({"action": "list", "ancestor": "/root", "state": "closed"}));
    assert_eq!(paths(&r), ["/root/lead/api_check"]);
    let r = root.thread(json!({"action": "list", "parent": "/root/lead", "state": "live"}));
    assert_eq!(paths(&r), ["/root/lead/docs_check"]);

    // wait reads the rows until the holding serve records it idle; its answer keeps its
    // line breaks.
    let req = root.send(
        "thread",
        json!({"action": "wait", "id": "lead/docs_check", "timeoutMs": 20000}),
    );
    let r = root.response(req, Duration::from_secs(30));
    let r = &r["result"];
    assert_eq!(r["details"]["kind"], "waited", "{r}");
    assert_eq!(r["details"]["timedOut"], false);
    assert_eq!(snap(r)["phase"], "idle");
    assert_eq!(snap(r)["resultSummary"], "first line second line");
    assert!(
        text(r).ends_with("\n\nResult summary (22 chars):\nfirst line\nsecond line"),
        "{}",
        text(r)
    );
    let waiting = root.progress_of(req).len();
    assert!(
        waiting >= 1,
        "progress while waiting on another serve's thread"
    );
    // timeoutMs 0 on a live thread: timed out at once.
    let r = root.thread(json!({"action": "wait", "id": docs, "timeoutMs": 0}));
    assert_eq!(r["details"]["timedOut"], true);

    root.close(Duration::from_secs(20));
    lead.close(Duration::from_secs(20));
    review.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
    db_check::db_check(&w.base.db).unwrap();
}

/// send, stop and resume of a grandchild go to the serve that holds it as `commands` rows and
/// answer as the contract shapes them; once that serve is gone, the thread is restored stale
/// and the root's serve resumes it as its new owner.
#[test]
fn send_stop_and_resume_of_a_grandchild_are_carried_out_by_its_serve() {
    let w = World::new();
    let mut root = w.serve("ses_root", None);
    start(&mut root, "lead");
    let mut lead = w.serve_of("/root/lead", 1);
    let lead_pid = lead.child.id() as i64;
    let docs = start(&mut lead, "docs_check");
    wait_idle(&mut root, "lead/docs_check");

    // send: the holding serve sends it and says what happened.
    let r = root.thread(json!({"action": "send", "id": "lead/docs_check", "message": "more"}));
    assert_eq!(r["details"]["kind"], "sent", "{r}");
    assert_eq!(r["details"]["mode"], "prompt");
    assert_eq!(r["details"]["accepted"], true);
    assert_eq!(r["details"]["error"], Value::Null);
    assert!(
        text(&r).starts_with("Sent message to \"")
            && text(&r)
                .contains(" with mode prompt.\nPath: /root/lead/docs_check\nAccepted: yes\n")
            && text(&r).ends_with(&format!(
                "\nNote: carried out by the serve that holds it (pid {lead_pid})."
            )),
        "{}",
        text(&r)
    );
    let r = wait_idle(&mut root, "lead/docs_check");
    assert_eq!(snap(&r)["resultSummary"], "reply to more");
    // An explicit mode is kept.
    let r =
        root.thread(json!({"action": "send", "id": docs, "message": "again", "mode": "follow_up"}));
    assert_eq!(r["details"]["mode"], "follow_up");
    assert_eq!(r["details"]["accepted"], true);
    wait_idle(&mut root, &docs);
    let conn = w.conn();
    let done: Vec<(String, String)> =
        common::pairs(&conn, "SELECT kind, state FROM commands ORDER BY id");
    assert_eq!(
        done,
        [
            ("send".into(), "done".into()),
            ("send".into(), "done".into())
        ]
    );

    // stop: the holding serve stops it; the result is the closed snapshot.
    let r = root.thread(json!({"action": "stop", "id": "lead/docs_check"}));
    assert_eq!(r["details"]["kind"], "stopped", "{r}");
    assert_eq!(snap(&r)["status"], "closed");
    assert_eq!(snap(&r)["exit"]["kind"], "stopped");
    assert_eq!(r["details"]["alreadyClosed"], false, "{r}");
    assert!(
        text(&r).contains("carried out by the serve that holds it"),
        "{}",
        text(&r)
    );
    // A send to it now: closed, with the contract's text.
    let e = root.thread_error(json!({"action": "send", "id": "lead/docs_check", "message": "x"}));
    assert_eq!(e["code"], "closed");
    assert!(e["message"]
        .as_str()
        .unwrap()
        .starts_with("Thread is closed: lead/docs_check. Repair: resume it first"));
    let r = root.thread(json!({"action": "stop", "id": docs}));
    assert_eq!(r["details"]["alreadyClosed"], true);

    // resume: its manager's serve (lead's) launches it again and holds it.
    let r = root.thread(json!({"action": "resume", "id": "lead/docs_check"}));
    assert_eq!(r["details"]["kind"], "resumed", "{r}");
    assert_eq!(r["details"]["alreadyLive"], false);
    assert_eq!(snap(&r)["status"], "live");
    assert_eq!(w.owner_pid("/root/lead/docs_check"), lead_pid);
    let r = root.thread(json!({"action": "resume", "id": "lead/docs_check"}));
    assert_eq!(r["details"]["alreadyLive"], true);
    // lead's serve sees its own thread as live and sends to it itself.
    let r = lead.thread(json!({"action": "send", "id": "docs_check", "message": "hello"}));
    assert_eq!(r["details"]["accepted"], true, "{r}");
    wait_idle(&mut root, &docs);

    // The holding serve dies: a watcher's restore pass (the root's serve's, within about a
    // second) closes the thread as stale; a poll reports the rows meanwhile.
    lead.child.kill().unwrap();
    lead.child.wait().unwrap();
    drop(lead);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let r = loop {
        let r = root.thread(json!({"action": "poll", "id": "lead/docs_check"}));
        if snap(&r)["status"] == "closed" || std::time::Instant::now() > deadline {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(snap(&r)["status"], "closed", "{r}");
    assert_eq!(snap(&r)["exit"]["kind"], "stale");
    assert_eq!(snap(&r)["resumable"], true);
    // With no serve left for its manager, the root's serve takes it over.
    let r = root.thread(json!({"action": "resume", "id": "lead/docs_check"}));
    assert_eq!(r["details"]["alreadyLive"], false, "{r}");
    assert!(!text(&r).contains("carried out by"), "{}", text(&r));
    assert_eq!(w.owner_pid("/root/lead/docs_check"), root.child.id() as i64);
    let env = std::fs::read(format!(
        "/proc/{}/environ",
        snap(&r)["pid"].as_i64().unwrap()
    ))
    .unwrap();
    let env = String::from_utf8_lossy(&env);
    for want in [
        "PI_THREADS_PATH=/root/lead/docs_check",
        "PI_THREADS_DEPTH=2",
        "PI_THREADS_PARENT_PATH=/root/lead",
        &format!("PI_THREADS_SELF_ID={docs}"),
    ] {
        assert!(
            env.split('\0').any(|v| v == want),
            "{want} in the child's environment"
        );
    }
    let r =
        root.thread(json!({"action": "send", "id": "lead/docs_check", "message": "taken over"}));
    assert_eq!(r["details"]["accepted"], true, "{r}");
    assert!(!text(&r).contains("carried out by"));
    let r = wait_idle(&mut root, "lead/docs_check");
    let file = snap(&r)["session"]["file"].as_str().unwrap().to_string();
    assert_eq!(
        serve_client::session_user_texts(std::path::Path::new(&file)),
        ["work on docs_check", "more", "again", "hello", "taken over"],
        "one session file across its three processes, each message once"
    );

    // A new serve of lead's session finds its thread held by the root's serve: its own stop
    // goes to the root's serve as a row.
    let mut lead = w.serve_of("/root/lead", 1);
    let r = lead.thread(json!({"action": "stop", "id": "docs_check"}));
    assert_eq!(snap(&r)["status"], "closed", "{r}");
    assert!(
        text(&r).contains(&format!("pid {}", root.child.id())),
        "{}",
        text(&r)
    );

    root.close(Duration::from_secs(20));
    lead.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
    db_check::db_check(&w.base.db).unwrap();
}

/// A command nobody takes is withdrawn, and the requester says so with a `Repair:`; the
/// owner's own refusal comes back with its code.
#[test]
fn a_refused_or_untaken_command_is_a_clear_error() {
    let w = World::new();
    let mut root = w.serve("ses_root", None);
    start(&mut root, "lead");
    let mut lead = w.serve_of("/root/lead", 1);
    start(&mut lead, "docs_check");
    wait_idle(&mut root, "lead/docs_check");

    // The owner refuses (no session file is known to resume from): its error comes back as
    // it is, code and text.
    lead.thread(json!({"action": "stop", "id": "docs_check"}));
    let conn = w.conn();
    conn.execute(
        "UPDATE threads SET session_file = NULL WHERE path = '/root/lead/docs_check'",
        (),
    )
    .unwrap();
    let e = root.thread_error(json!({"action": "resume", "id": "lead/docs_check"}));
    assert_eq!(e["code"], "not_resumable", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .starts_with("Cannot resume /root/lead/docs_check: no saved Pi session file"),
        "{e}"
    );
    let (state, result): (String, String) = conn
        .query_row(
            "SELECT state, result FROM commands WHERE kind = 'resume'",
            (),
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(state, "failed");
    let err: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(err["code"], "not_resumable");

    // A living process that is not a serve holds it (as far as the rows say): nobody takes
    // the command, so it is withdrawn after the pickup wait and nothing was done.
    start(&mut lead, "slow");
    wait_idle(&mut root, "lead/slow");
    let (pid, started): (i64, i64) = conn
        .query_row(
            "SELECT owner_pid, owner_started_at FROM threads WHERE path = '/root/lead/slow'",
            (),
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let sleeper_started = threadbase::runtime::signals::start_time(sleeper.id() as i64).unwrap();
    let set_owner = |pid: i64, started: i64| {
        conn.execute(
            "UPDATE threads SET owner_pid = ?1, owner_started_at = ?2 WHERE path = '/root/lead/slow'",
            (pid, started),
        )
        .unwrap();
    };
    set_owner(sleeper.id() as i64, sleeper_started);
    let asked = std::time::Instant::now();
    let e = root.thread_error(json!({"action": "send", "id": "lead/slow", "message": "hello"}));
    set_owner(pid, started);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_eq!(e["code"], "conflict", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains(
            "did not take the send within 5 s, so it was withdrawn and nothing was done. Repair:"
        ),
        "{e}"
    );
    assert!(asked.elapsed() >= Duration::from_secs(5));
    let state: String = conn
        .query_row(
            "SELECT state FROM commands WHERE kind = 'send' ORDER BY id DESC LIMIT 1",
            (),
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(state, "failed");
    // Its real holder never acts on the withdrawn row, and answers the next one.
    std::thread::sleep(Duration::from_millis(300));
    let r = root.thread(json!({"action": "send", "id": "lead/slow", "message": "now"}));
    assert_eq!(r["details"]["accepted"], true, "{r}");
    let r = wait_idle(&mut root, "lead/slow");
    assert_eq!(snap(&r)["resultSummary"], "reply to now");
    let file = snap(&r)["session"]["file"].as_str().unwrap().to_string();
    assert_eq!(
        serve_client::session_user_texts(std::path::Path::new(&file)),
        ["work on slow", "now"],
        "the withdrawn send never reached the child"
    );

    root.close(Duration::from_secs(20));
    lead.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
    db_check::db_check(&w.base.db).unwrap();
}

/// Issue 33: the root's serve on host A, the child's own serve on host B (each pid 1 of a PID
/// namespace of its own). A send, a stop and a resume of the grandchild from A are carried out
/// on B. Once B's serve is gone, A leaves B's thread alone; once B's lease has run out, A's
/// requests say so at once; `threadbase host forget` closes it, and A takes it over.
#[test]
fn send_stop_and_resume_from_host_a_reach_a_grandchild_on_host_b() {
    let works = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !works {
        let why = "`unshare --pid --fork --mount-proc` fails here (it needs root)";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
        eprintln!("send_stop_and_resume_from_host_a_reach_a_grandchild_on_host_b: skipped: {why}");
        return;
    }
    let w = World::new();
    let mut root = w.serve_on(Some("host-a"), "ses_root", None);
    start(&mut root, "lead");
    let (id, session) = w.row("/root/lead");
    let mut lead = w.serve_on(Some("host-b"), &session, Some(("/root/lead", &id, 1)));
    let docs = start(&mut lead, "docs_check");
    wait_idle(&mut root, "lead/docs_check");
    // Both serves are pid 1, each in its own namespace.
    assert_eq!(w.owner_pid("/root/lead"), 1);
    assert_eq!(w.owner_pid("/root/lead/docs_check"), 1);

    // Issue 46: a pid of another host means nothing here, so the note names the host too.
    let on_b = "\nNote: carried out by the serve that holds it (pid 1 on host host-b).";
    let r = root.thread(json!({"action": "send", "id": "lead/docs_check", "message": "more"}));
    assert_eq!(r["details"]["accepted"], true, "{r}");
    assert!(text(&r).ends_with(on_b), "{}", text(&r));
    let r = wait_idle(&mut root, "lead/docs_check");
    assert_eq!(snap(&r)["resultSummary"], "reply to more");
    let r = root.thread(json!({"action": "stop", "id": "lead/docs_check"}));
    assert_eq!(snap(&r)["exit"]["kind"], "stopped", "{r}");
    assert!(text(&r).ends_with(on_b), "{}", text(&r));
    let r = root.thread(json!({"action": "resume", "id": "lead/docs_check"}));
    assert_eq!(r["details"]["kind"], "resumed", "{r}");
    assert!(text(&r).ends_with(on_b), "{}", text(&r));
    assert_eq!(snap(&r)["status"], "live");
    wait_idle(&mut root, &docs);
    let host: String = w
        .conn()
        .query_row(
            "SELECT host_id FROM threads WHERE path = '/root/lead/docs_check'",
            (),
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        host, "host-b",
        "resumed on the host that holds its session file"
    );

    // B's serve dies. A's watcher checks owners every second: B's row stays live.
    lead.child.kill().unwrap();
    lead.child.wait().unwrap();
    drop(lead);
    std::thread::sleep(Duration::from_millis(1500));
    let r = root.thread(json!({"action": "poll", "id": "lead/docs_check"}));
    assert_eq!(snap(&r)["status"], "live", "{r}");
    // B's lease runs out (its last heartbeat an hour back): A's requests say so at once.
    w.conn()
        .execute(
            "UPDATE host_serves SET heartbeat_at = '2026-01-01T00:00:00.000Z' WHERE host_id = 'host-b'",
            (),
        )
        .unwrap();
    let e = root.thread_error(json!({"action": "send", "id": "lead/docs_check", "message": "x"}));
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("held on host host-b, unreachable since 2026-01-01T00:00:00.000Z")
            && message.contains("Repair:"),
        "{e}"
    );
    // Forgotten on purpose: closed as stale, and A takes it over.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&w.base.db)
        .args(["host", "forget", "host-b"])
        .env("THREADBASE_HOST_ID", "host-a")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let r = root.thread(json!({"action": "poll", "id": "lead/docs_check"}));
    assert_eq!(snap(&r)["exit"]["kind"], "stale", "{r}");
    let r = root.thread(json!({"action": "resume", "id": "lead/docs_check"}));
    assert_eq!(r["details"]["alreadyLive"], false, "{r}");
    assert!(!text(&r).contains("carried out by"), "{}", text(&r));
    wait_idle(&mut root, &docs);
    root.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty(), "{:?}", w.base.leftovers());
}
