//! `threads_send`: keyed sends are idempotent and only the owning coordinator's.

use super::{
    error, message, tool, wait_until, wait_view, world, COORD, K1_MESSAGE, QUICK, REVIEW_WORKER,
};
use serde_json::json;
use std::time::Duration;

#[test]
fn keyed_sends_are_idempotent_and_owned() {
    let w = world(QUICK);
    let mut s = w.serve(COORD, &[]);
    tool(
        &mut s,
        "threads_spawn",
        json!({"key": "review", "title": "Review", "directory": w.work(), "task": "First"}),
    );
    wait_view(&mut s, REVIEW_WORKER, |v| v["outcome"] == "succeeded");
    let hidden = tool(&mut s, "threads_hide", json!({"workerID": REVIEW_WORKER}));
    assert_eq!(hidden["hidden"], true);

    let send = json!({"workerID": REVIEW_WORKER, "key": "k1", "text": "Second"});
    let r = tool(&mut s, "threads_send", send.clone());
    assert_eq!(
        r,
        json!({"workerID": REVIEW_WORKER, "messageID": K1_MESSAGE})
    );
    wait_until("the send", Duration::from_secs(10), || {
        w.user_messages(REVIEW_WORKER).len() == 2
    });
    let v = wait_view(&mut s, REVIEW_WORKER, |v| v["outcome"] == "succeeded");
    assert_eq!(v["hidden"], false, "a send removes the hidden override");
    // Same key, same text: a no-op retry with the same ids.
    let r = tool(&mut s, "threads_send", send.clone());
    assert_eq!(r["messageID"], K1_MESSAGE);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(w.user_messages(REVIEW_WORKER).len(), 2);
    // Same key, other text: refused.
    let e = error(
        &mut s,
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "k1", "text": "Different"}),
    );
    assert_eq!(e["code"], "conflict");
    assert!(message(&e).starts_with("This send key already belongs to different text"));
    // Concurrent sends under new keys: each delivered once, in order.
    let a = s.send(
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "k2", "text": "Third"}),
    );
    let b = s.send(
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "k2", "text": "Third"}),
    );
    for id in [a, b] {
        let r = s.response(id, Duration::from_secs(30));
        assert_eq!(
            r["result"]["details"]["messageID"],
            threadbase::contract::worker::send_message_id(&REVIEW_WORKER.into(), "k2")
        );
    }
    wait_until("the third message", Duration::from_secs(10), || {
        w.user_messages(REVIEW_WORKER).len() == 3
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        w.user_messages(REVIEW_WORKER),
        [
            w.user_messages(REVIEW_WORKER)[0].clone(),
            "Second".to_string(),
            "Third".to_string()
        ]
    );
    // Keys are any characters and scoped to the worker.
    let odd = "a key: with / \\ and \"quotes\" and ünïcode";
    let r = tool(
        &mut s,
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": odd, "text": "Fourth"}),
    );
    assert_eq!(
        r["messageID"],
        threadbase::contract::worker::send_message_id(&REVIEW_WORKER.into(), odd)
    );

    // Ownership and unknown workers.
    let e = error(
        &mut s,
        "threads_send",
        json!({"workerID": "ses_00000000000000000000000000000000", "key": "k", "text": "x"}),
    );
    assert_eq!(e["code"], "unknown_reference");
    let mut other = w.serve("ses_other", &[]);
    for (method, params) in [
        ("threads_send", send.clone()),
        ("threads_interrupt", json!({"workerID": REVIEW_WORKER})),
        ("threads_hide", json!({"workerID": REVIEW_WORKER})),
    ] {
        let e = error(&mut other, method, params);
        assert_eq!(e["code"], "forbidden");
        assert!(message(&e).starts_with("Only the owning coordinator may control this worker"));
    }
    assert!(
        tool(&mut other, "threads_list", json!({}))["workers"]
            .as_array()
            .unwrap()
            .is_empty(),
        "a list shows the caller's own workers"
    );
    let e = error(
        &mut s,
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "", "text": "x"}),
    );
    assert_eq!(e["code"], "invalid_params");
    let e = error(
        &mut s,
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "k".repeat(201), "text": "x"}),
    );
    assert!(message(&e).contains("key must be at most 200 characters"));
    other.close(Duration::from_secs(20));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}
