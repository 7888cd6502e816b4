//! Contract A's notices through a real `threadbase serve` whose children are scripted agents:
//! a child that finishes its turn, exits, fails, is stopped by another process or is closed as
//! stale tells its parent session once, as a `notice` line; a `wait` that reported it and the
//! session's own `stop` don't repeat it; a notice written while the session's serve was gone
//! reaches its next serve; `THREADBASE_NOTICES=off` keeps them quiet.

use crate::support::serve_client;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_client::{Scripted, Serve};

struct World {
    base: Scripted,
    parent_session: PathBuf,
}

fn world(script: Value) -> World {
    let base = Scripted::new("notices");
    let header = json!({"type":"session","version":3,"id":"ses_notices","timestamp":"2026-12-04T00:00:00.000Z","cwd":base.root});
    let parent_session = base.session_file("sessions/parent.jsonl", &[header]);
    base.script("script", &script.to_string());
    World {
        base,
        parent_session,
    }
}

impl World {
    fn serve(&self, env: &[(&str, &str)]) -> Serve {
        let args = vec![
            "--session-file".into(),
            self.parent_session.display().to_string(),
        ];
        self.base.serve("script", args, env)
    }

    fn db(&self) -> crate::support::sql::Conn {
        let conn = crate::support::sql::Conn::open(&self.base.db).unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        conn
    }

    /// The state of every contract A notice row, oldest first.
    fn notice_rows(&self) -> Vec<(String, String)> {
        let conn = self.db();
        let mut stmt = conn
            .prepare("SELECT state, body FROM mailbox WHERE kind = 'notice' ORDER BY id")
            .unwrap();

        stmt.query_map((), |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<rusqlite::Result<Vec<_>>>()
            .unwrap()
    }

    fn close(&self, mut s: Serve) {
        s.close(Duration::from_secs(20));
        assert!(self.base.leftovers().is_empty());
    }
}

fn start(s: &mut Serve, task: &str, prompt: &str) -> String {
    let r = s.thread(json!({"action": "start", "prompt": prompt, "taskName": task}));
    r["details"]["snapshot"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string()
}

/// Waits until `s` has emitted `n` notices; returns them.
fn notices_after(s: &Serve, n: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let notices = s.notices();
        if notices.len() >= n {
            return notices;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{} of {n} notices after 15 s: {notices:#?}",
            notices.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What the watcher would have delivered by now, had it anything more: two of its polls.
fn settle_a_moment() {
    std::thread::sleep(Duration::from_millis(300));
}

fn text(n: &Value) -> &str {
    n["params"]["text"].as_str().unwrap()
}

#[test]
fn a_child_that_finishes_its_turn_tells_its_parent_once_with_its_answer() {
    let w = world(
        json!({"turns": [[{"delay_ms": 200}, {"text": "All 3 docs checked.\nNo stale examples."}]]}),
    );
    let mut s = w.serve(&[]);
    let id = start(&mut s, "review", "Review the docs");
    let notices = notices_after(&s, 1);
    settle_a_moment();
    assert_eq!(s.notices().len(), 1, "{:#?}", s.notices());
    let n = &notices[0];
    assert_eq!(n["params"]["threadId"], id.as_str());
    assert_eq!(n["params"]["path"], "/root/review");
    assert_eq!(n["params"]["kind"], "notice");
    assert_eq!(
        text(n),
        "Thread \"Review the docs\" (/root/review) finished its turn: live/idle.\nAnswer:\nAll 3 docs checked.\nNo stale examples."
    );
    assert_eq!(w.notice_rows()[0].0, "delivered");
    // The thread is still live: the session's own stop closes it without another notice.
    let r = s.thread(json!({"action": "stop", "id": id}));
    assert_eq!(r["details"]["snapshot"]["status"], "closed", "{r}");
    settle_a_moment();
    assert_eq!(s.notices().len(), 1, "{:#?}", s.notices());
    assert_eq!(w.notice_rows().len(), 1);
    w.close(s);
}

#[test]
fn a_wait_that_reports_the_settle_is_not_repeated_by_a_notice() {
    let w = world(json!({"turns": [[{"delay_ms": 400}, {"text": "done waiting"}]]}));
    let mut s = w.serve(&[]);
    let id = start(&mut s, "waited", "Take a moment");
    let r = s.thread(json!({"action": "wait", "id": id, "timeoutMs": 10000}));
    assert_eq!(r["details"]["timedOut"], false, "{r}");
    settle_a_moment();
    assert!(s.notices().is_empty(), "{:#?}", s.notices());
    // The row was written and marked delivered by the wait's result.
    let rows = w.notice_rows();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].0, "delivered");
    assert!(rows[0].1.contains("done waiting"), "{rows:?}");
    w.close(s);
}

#[test]
fn a_wait_that_times_out_lets_the_later_notice_through() {
    let w = world(json!({"turns": [[{"delay_ms": 800}, {"text": "late answer"}]]}));
    let mut s = w.serve(&[]);
    let id = start(&mut s, "slow", "Be slow");
    let r = s.thread(json!({"action": "wait", "id": id, "timeoutMs": 100}));
    assert_eq!(r["details"]["timedOut"], true, "{r}");
    let notices = notices_after(&s, 1);
    assert!(text(&notices[0]).contains("late answer"), "{notices:#?}");
    w.close(s);
}

#[test]
fn a_stop_from_another_process_tells_the_parent_and_the_sessions_own_stop_does_not() {
    let w = world(json!({"turns": [[{"delay_ms": 30000}, {"text": "never"}]]}));
    let mut s = w.serve(&[]);
    let own = start(&mut s, "own", "Long job");
    let other = start(&mut s, "other", "Long job too");
    s.thread(json!({"action": "stop", "id": own}));
    // `threadbase stop` writes a command row that this serve carries out.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&w.base.db)
        .args(["stop", "/root/other"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let notices = notices_after(&s, 1);
    settle_a_moment();
    let notices_now = s.notices();
    assert_eq!(notices_now.len(), 1, "{notices_now:#?}");
    assert_eq!(notices[0]["params"]["threadId"], other.as_str());
    assert_eq!(
        text(&notices[0]),
        "Thread \"Long job too\" (/root/other) was stopped: closed/stopped."
    );
    w.close(s);
}

#[test]
fn a_child_that_dies_tells_its_parent_it_failed() {
    let w = world(json!({"turns": [[{"text": "half way"}, {"crash": true}]]}));
    let mut s = w.serve(&[]);
    start(&mut s, "crashy", "Do it");
    let notices = notices_after(&s, 1);
    let last = text(notices.last().unwrap());
    assert!(
        last.starts_with(
            "Thread \"Do it\" (/root/crashy) failed: closed/failed. Child Pi process exited with signal SIGKILL."
        ),
        "{notices:#?}"
    );
    assert!(last.ends_with("Last answer:\nhalf way"), "{last}");
    w.close(s);
}

#[test]
fn a_thread_closed_as_stale_while_its_serve_was_gone_is_told_to_the_next_serve() {
    let w = world(json!({"turns": [[{"delay_ms": 30000}, {"text": "never"}]]}));
    let mut s = w.serve(&[]);
    start(&mut s, "orphan", "Outlive my serve");
    // The serve dies without a word; its child's group is killed as a crash would leave it
    // for the restore pass to find.
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    for pid in w.base.leftovers() {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    let mut next = w.serve(&[]);
    let notices = notices_after(&next, 1);
    assert!(
        text(&notices[0]).starts_with(
            "Thread \"Outlive my serve\" (/root/orphan) was closed as stale: closed/stale."
        ),
        "{notices:#?}"
    );
    next.thread(json!({"action": "list"}));
    w.close(next);
}

#[test]
fn notices_turned_off_are_recorded_but_not_sent() {
    let w = world(json!({"turns": [[{"text": "quiet answer"}]]}));
    let mut s = w.serve(&[("THREADBASE_NOTICES", "off")]);
    start(&mut s, "quiet", "Say it quietly");
    let started = Instant::now();
    while w.notice_rows().first().map(|r| r.0.as_str()) != Some("delivered") {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            w.notice_rows()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    settle_a_moment();
    assert!(s.notices().is_empty(), "{:#?}", s.notices());
    w.close(s);
}
