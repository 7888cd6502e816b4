//! `poll`: answered while writes wait for the database lock, its kept answers, and another
//! session's thread id.

use super::{details, message, with_serve, world, SCRIPT};
use serde_json::json;
use std::time::Duration;

/// A write waiting for the database lock (another process holds it) waits off the runtime's
/// workers: with more such writes queued than there are workers, a poll is still answered.
#[test]
fn writes_waiting_for_the_lock_do_not_hold_up_a_poll() {
    if crate::support::sql::sqlite_only(
        "writes_waiting_for_the_lock_do_not_hold_up_a_poll",
        "holds SQLite's write lock from another connection (BEGIN IMMEDIATE)",
    ) {
        return;
    }
    let (w, mut s) = with_serve(SCRIPT);
    for name in ["a", "b", "c", "d"] {
        s.thread(json!({"action": "start", "prompt": "work", "taskName": name}));
        s.thread(json!({"action": "stop", "id": name}));
    }
    let mut other = rusqlite::Connection::open(&w.base.db).unwrap();
    let lock = other
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    let archives: Vec<u64> = ["a", "b", "c"]
        .iter()
        .map(|name| s.send("thread", json!({"action": "archive", "id": name})))
        .collect();
    // The poll is answered while the lock is still held (the archives are all waiting).
    let poll = s.send("thread", json!({"action": "poll", "id": "d"}));
    let p = s.response(poll, Duration::from_secs(20));
    assert_eq!(p["result"]["details"]["snapshot"]["status"], "closed");
    assert_eq!(
        s.answer_count(archives[0]),
        0,
        "the archive waits for the lock"
    );
    lock.rollback().unwrap();
    for id in archives {
        let r = s.response(id, Duration::from_secs(20));
        assert_eq!(r["result"]["details"]["archived"], true, "{r}");
    }
    w.close_all(s);
}

/// A closed thread's poll and list answers are kept in the serve's memory after the first
/// read, and a later read gives the same answer; a change of the database drops them, whoever
/// makes it: another process (a row written straight into the database, as another serve, a
/// CLI command or another host would) or this serve (archive). So the next poll and list say
/// what is true. On both backends.
#[test]
fn kept_answers_are_the_rendered_ones_and_any_change_drops_them() {
    let (w, mut s) = with_serve(SCRIPT);
    s.thread(json!({"action": "start", "prompt": "Say hi", "taskName": "hi"}));
    s.thread(json!({"action": "wait", "id": "hi", "timeoutMs": 20000}));
    s.thread(json!({"action": "stop", "id": "hi"}));
    let poll = json!({"action": "poll", "id": "hi", "detail": "full"});
    let list = json!({"action": "list", "state": "closed"});
    let rendered_poll = s.thread(poll.clone());
    let rendered_list = s.thread(list.clone());
    assert_eq!(details(&rendered_poll)["snapshot"]["status"], "closed");
    assert_eq!(
        s.thread(poll.clone()),
        rendered_poll,
        "the kept poll differs"
    );
    assert_eq!(
        s.thread(list.clone()),
        rendered_list,
        "the kept list differs"
    );

    // Another process changes the thread's answer and its name (through threadbase's store,
    // which announces its commit on PostgreSQL): the next poll says so (on PostgreSQL once the
    // notification arrived).
    crate::support::sql::exec(
        &w.base.db,
        "UPDATE thread_output SET last_assistant_text = 'changed elsewhere' \
         WHERE thread_id = (SELECT id FROM threads WHERE path = '/root/hi'); \
         UPDATE threads SET name = 'renamed elsewhere' WHERE path = '/root/hi'",
    );
    let r = crate::support::postgres::read_until_heard(
        || s.thread(poll.clone()),
        |r| details(r)["snapshot"]["lastAssistantText"] == "changed elsewhere",
    );
    assert_eq!(
        details(&r)["snapshot"]["lastAssistantText"],
        "changed elsewhere",
        "a kept poll outlived another process's change: {r}"
    );
    let r = s.thread(list.clone());
    assert_eq!(
        details(&r)["threads"][0]["name"],
        "renamed elsewhere",
        "a kept list outlived another process's change: {r}"
    );

    s.thread(json!({"action": "archive", "id": "hi"}));
    let r = s.thread(poll);
    assert_eq!(details(&r)["snapshot"]["archived"], true);
    let r = s.thread(json!({"action": "list", "state": "closed", "visibility": "all"}));
    assert_eq!(details(&r)["threads"][0]["archived"], true);
    s.close(std::time::Duration::from_secs(20));
}

/// Threads belong to the session that started them: another session's exact thread id is
/// still an unknown reference (the contract's text), which now says whose thread it is and
/// how to continue that session (#28 item 3).
#[test]
fn another_sessions_thread_id_names_that_session_and_its_file() {
    let w = world(serde_json::from_str(SCRIPT).unwrap());
    let mut s = w.serve(&[]);
    let started = s.thread(json!({"action": "start", "prompt": "x", "taskName": "quick"}));
    let id = started["details"]["snapshot"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    w.close_all(s);
    let args = vec!["--session-id".into(), "ses_other".into()];
    let mut other = w.base.serve("script", args, &[]);
    let e = other.thread_error(json!({"action": "poll", "id": id}));
    assert_eq!(e["code"], "unknown_reference", "{e}");
    let text = message(&e);
    let file = w.parent_session.display().to_string();
    assert!(text.starts_with(&format!("Unknown thread reference: \"{id}\". It is /root/quick of another Pi session, ses_parent (session file {file})")), "{text}");
    assert!(text.contains(&format!("Repair: to use it, continue that session with `pi --session {file}`, or once that session has ended, resume it here by its id to adopt it; otherwise use a known path/id")), "{text}");
    // A path is this session's namespace: no other session is named for it.
    let e = other.thread_error(json!({"action": "poll", "id": "/root/quick"}));
    assert!(!message(&e).contains("another Pi session"), "{e}");
    w.close_all(other);
}
