//! `stop`: a stop request another process writes (as `threadbase top` does) is carried out by
//! the serve that holds the thread.

use super::{details, world};
use serde_json::json;
use std::time::Duration;

#[test]
fn rows_written_by_other_processes_reach_the_owning_serve() {
    let w = world(json!({"turns": [{"steps": [{"delay_ms": 30000}, {"text": "never"}]}]}));
    let mut s = w.serve(&[]);
    let r = s.thread(json!({"action": "start", "prompt": "long job", "taskName": "long"}));
    let id = details(&r)["snapshot"]["id"].as_str().unwrap().to_string();
    let conn = crate::support::sql::Conn::open(&w.base.db).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    // A notice for this session's caller, written by another process: delivered once.
    conn.execute(
        "INSERT INTO mailbox (thread_id, direction, kind, message_id, body, created_at) VALUES (?1, 'to_parent', 'notice', 'msg_1', 'hello from elsewhere', 'now')",
        [&id],
    )
    .unwrap();
    // An emergency stop request, as `threadbase top` writes it.
    let started = std::time::Instant::now();
    conn.execute(
        "INSERT INTO commands (thread_id, kind, created_at) VALUES (?1, 'force_stop', 'now')",
        [&id],
    )
    .unwrap();
    loop {
        let (state, result): (String, Option<String>) = conn
            .query_row("SELECT state, result FROM commands", (), |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        if state == "done" {
            assert_eq!(result.as_deref(), Some("stopped"));
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the stop request was not carried out"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status: String = conn
        .query_row("SELECT status FROM threads WHERE id = ?1", [&id], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(status, "closed");
    // The stop came from another process: the thread's own notice follows the inserted one.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while s.notices().len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let notices = s.notices();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert_eq!(notices[0]["params"]["text"], "hello from elsewhere");
    assert_eq!(notices[0]["params"]["path"], "/root/long");
    assert_eq!(
        notices[1]["params"]["text"],
        "Thread \"long job\" (/root/long) was stopped: closed/stopped."
    );
    let undelivered: i64 = conn
        .query_row(
            "SELECT count(*) FROM mailbox WHERE state <> 'delivered'",
            (),
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(undelivered, 0);
    s.close(Duration::from_secs(10));
    assert!(w.base.leftovers().is_empty());
}
