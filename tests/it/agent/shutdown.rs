//! Not a verb: serve's shutdown (SIGTERM, stdin EOF) stops its threads and answers every
//! request it has read.

use super::{call, spawn_detached, world};
use serde_json::json;
use std::time::{Duration, Instant};

#[test]
fn sigterm_shuts_serve_down_like_stdin_eof() {
    let w = world();
    let mut root = w.root("slow", &[]);
    spawn_detached(&mut root, "a", "long");
    // What Pi's shutdown sends its process group.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(root.child.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = root.close(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    assert_eq!(
        w.sql("SELECT agent_state, status FROM threads WHERE path = '/root/a'")[0],
        vec![json!("stopped"), json!("closed")]
    );
    w.finish(10);
}

#[test]
fn stdin_eof_answers_every_request_already_read() {
    let w = world();
    w.base.script(
        "glacial",
        &json!({"turns": [{"steps": [{"delay_ms": 60000}, {"text": "late"}]}]}).to_string(),
    );
    // A fresh database: the first requests race the migrations, then stdin closes at once.
    let mut root = w.root("slow", &[]);
    let mut ids: Vec<u64> = (0..20)
        .map(|_| root.send("agent_status", json!({})))
        .collect();
    ids.push(root.send(
        "agent_spawn",
        json!({"path": "a", "type": "worker", "task": "lead", "wait": false}),
    ));
    let status = root.close(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    for id in &ids {
        let r = root.response(*id, Duration::from_secs(1));
        assert!(r.get("error").is_none(), "request {id}: {r}");
        assert_eq!(root.answer_count(*id), 1, "request {id}");
    }
    assert_eq!(
        w.sql("SELECT agent_state FROM threads WHERE path = '/root/a'")[0][0],
        "stopped"
    );

    // A wait on this serve's own child settles when shutdown stops the child.
    let mut root = w.root("slow", &[]);
    call(
        &mut root,
        "agent_steer",
        json!({"path": "a", "message": "go on"}),
    );
    let wait = root.send("agent_wait", json!({"path": "a"}));
    std::thread::sleep(Duration::from_millis(200));
    let status = root.close(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    let r = root.response(wait, Duration::from_secs(1));
    assert_eq!(r["result"]["details"]["state"], "stopped", "{r}");
    assert_eq!(root.answer_count(wait), 1);

    // A wait that shutdown cannot settle (the thread is another serve's) is cancelled after the
    // grace period, with an answer that says so.
    let mut root = w.root("slow", &[]);
    call(
        &mut root,
        "agent_steer",
        json!({"path": "a", "message": "go on"}),
    );
    let mut a = w.child("/root/a", "glacial");
    spawn_detached(&mut a, "b", "dig");
    let wait = root.send("agent_wait", json!({"path": "/root/a/b"}));
    std::thread::sleep(Duration::from_millis(300));
    let closed_at = Instant::now();
    let status = root.close(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    let took = closed_at.elapsed();
    let r = root.response(wait, Duration::from_secs(1));
    assert_eq!(r["error"]["code"], "closed", "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("cancelled") && message.contains("Repair:"),
        "{message}"
    );
    assert_eq!(root.answer_count(wait), 1);
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(20),
        "cancelled after the grace period: {took:?}"
    );
    a.close(Duration::from_secs(30));
    w.finish(10);
}
