//! `start`: its refusals (the live and depth limits, bad settings, a missing child program)
//! and the launch of a child that answers its prompt and closes at once (pi-threads'
//! `test/thread-manager.test.ts` golden cases).

use super::{details, message, pick, status_phase_exit, world, World, SCRIPT};
use serde_json::{json, Value};
use std::time::Duration;

#[test]
fn limits_and_settings() {
    let w = world(serde_json::from_str(SCRIPT).unwrap());
    let mut s = w.serve(&[
        ("PI_THREADS_MAX_THREADS", "1"),
        ("PI_THREADS_IDLE_CLEANUP_MS", "soon"),
    ]);
    let one = s.thread(json!({"action": "start", "prompt": "one"}));
    let e = s.thread_error(json!({"action": "start", "prompt": "two"}));
    assert_eq!(e["code"], "limit");
    assert!(
        message(&e).starts_with("pi-threads live thread limit reached: 1/1"),
        "{e}"
    );
    // Once the first is idle, the refusal names it as what holds the slot, and says how idle
    // threads are freed (idle cleanup is off: "soon" is not a number).
    let id = one["details"]["snapshot"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = one["details"]["snapshot"]["path"]
        .as_str()
        .unwrap()
        .to_string();
    s.thread(json!({"action": "wait", "id": id, "timeoutMs": 20000}));
    let e = s.thread_error(json!({"action": "start", "prompt": "two"}));
    let text = message(&e);
    assert!(
        text.starts_with("pi-threads live thread limit reached: 1/1. Idle threads hold slots"),
        "{text}"
    );
    for needle in [
        &path,
        &id,
        "stop the idle threads",
        "PI_THREADS_IDLE_CLEANUP_MS (off by default)",
    ] {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }
    s.close(Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&s.stderr.lock().unwrap()).into_owned();
    assert!(stderr.contains(r#"[pi-threads] Ignoring invalid PI_THREADS_IDLE_CLEANUP_MS="soon" (expected a non-negative integer); using default."#), "{stderr}");

    let mut s = w.serve(&[("PI_THREADS_DEPTH", "2")]);
    let e = s.thread_error(json!({"action": "start", "prompt": "deep"}));
    assert_eq!(e["code"], "limit");
    assert!(
        message(&e).starts_with("pi-threads recursion depth 2 has reached PI_THREADS_MAX_DEPTH=2")
    );
    let e = s.thread_error(json!({"action": "start", "prompt": "x", "args": ["--model=foo"]}));
    assert!(message(&e).contains("Unsupported child Pi arg") || e["code"] == "limit");
    w.close_all(s);
}

#[test]
fn a_missing_child_program_is_a_clear_error_and_nothing_stays_live() {
    let w = world(serde_json::from_str(SCRIPT).unwrap());
    let args = vec![
        "--session-file".into(),
        w.parent_session.display().to_string(),
    ];
    let missing = [("THREADBASE_PI_COMMAND", r#"["/nonexistent/pi"]"#)];
    let mut s = w.base.serve("script", args, &missing);
    let e = s.thread_error(json!({"action": "start", "prompt": "x", "taskName": "ghost"}));
    assert_eq!(e["code"], "io");
    assert!(
        message(&e).contains("Repair: check that THREADBASE_PI_COMMAND"),
        "{e}"
    );
    let r = s.thread(json!({"action": "poll", "id": "ghost"}));
    let snap = &details(&r)["snapshot"];
    assert_eq!(
        status_phase_exit(snap),
        (Some("closed"), Some("failed"), Some("failed"))
    );
    s.close(Duration::from_secs(10));
}

/// test/thread-manager.test.ts, "records a child session before a fast-finishing child
/// closes": a child that accepts its prompt and exits at once. Returns the world and the
/// closed thread's list snapshot.
fn fast_finishing_child() -> (World, Value) {
    child_exiting_after_its_prompt(0)
}

/// A child that accepts its prompt and exits at once with `code`; the world and the closed
/// thread's list snapshot.
fn child_exiting_after_its_prompt(code: i32) -> (World, Value) {
    let w = world(json!({"turns": [[{"exit": code}]]}));
    let mut s = w.serve(&[]);
    let r = s.thread(json!({"action": "start", "prompt": "finish", "taskName": "quick"}));
    assert_eq!(details(&r)["promptAccepted"], true, "{r}");
    let snap = s.only_thread_once_closed(Duration::from_secs(20));
    w.close_all(s);
    (w, snap)
}

/// The part of that golden case threadbase meets: the closed thread's session is known, with
/// the child's session file and id.
#[test]
fn golden_fast_finishing_child_is_closed_with_its_session_known() {
    let (w, snap) = fast_finishing_child();
    let conn = crate::support::sql::Conn::open(&w.base.db).unwrap();
    let (file, id): (String, String) = conn
        .query_row(
            "SELECT session_file, session_id FROM threads WHERE path = '/root/quick'",
            (),
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        pick(&snap, &["status", "exit", "resumable"]),
        json!({"status": "closed", "exit": {"kind": "exited", "code": 0, "signal": null},
               "resumable": true})
    );
    assert_eq!(
        pick(&snap["session"], &["kind", "file", "id"]),
        json!({"kind": "known", "file": file, "id": id})
    );
}

/// The rest of it: like the original, the launch asks the child's state (`get_state`) before
/// it writes the prompt, so even a child that closes at once leaves its session's name and
/// pending count, `{kind: "known", file, id, name, pendingMessageCount: 0}`.
#[test]
fn golden_fast_finishing_child_session_has_its_name_and_pending_count() {
    let (_w, snap) = fast_finishing_child();
    let session = &snap["session"];
    assert_eq!(
        session,
        &json!({"kind": "known", "file": session["file"], "id": session["id"],
                "name": "finish", "pendingMessageCount": 0})
    );
}

/// test/thread-manager.test.ts, "classifies non-zero natural child exits as failed" (the prompt
/// is answered, then the child closes with code 1): `exit` is `{kind: "failed", message: "Child Pi process exited with code
/// 1"}`, naming only the parts of the status that are known (pi-threads' `classifyProcessExit`;
/// the signal-only and both-parts texts are pinned by `runtime::tests` and `runtime_process`).
#[test]
fn golden_fast_failing_child_is_failed_with_its_exit_code() {
    let (_w, snap) = child_exiting_after_its_prompt(1);
    assert_eq!(
        pick(&snap, &["status", "phase", "exit", "resumable"]),
        json!({"status": "closed", "phase": "failed",
               "exit": {"kind": "failed", "message": "Child Pi process exited with code 1"},
               "resumable": true})
    );
    let session = &snap["session"];
    assert_eq!(
        session,
        &json!({"kind": "known", "file": session["file"], "id": session["id"],
                "name": "finish", "pendingMessageCount": 0})
    );
}
