//! `agent_wait`: it holds its target's progress notices and releases them when it times out.

use super::{call, notices, spawn_detached, wait_for, world};
use serde_json::json;
use std::time::Duration;

#[test]
fn a_wait_holds_progress_notices_and_releases_them_when_it_times_out() {
    let w = world();
    let mut root = w.root("slow", &[]);
    spawn_detached(&mut root, "a", "lead");
    let mut a = w.child("/root/a", "slow");
    // The root waits (briefly) on /root/a while /root/a reports progress.
    let wait = root.send("agent_wait", json!({"path": "/root/a", "timeoutMs": 1200}));
    std::thread::sleep(Duration::from_millis(200));
    call(&mut a, "agent_update", json!({"message": "halfway there"}));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        notices(&root).is_empty(),
        "held while the wait runs: {:?}",
        notices(&root)
    );
    let r = root.response(wait, Duration::from_secs(10));
    assert_eq!(r["result"]["details"]["state"], "running", "{r}");
    // The wait timed out with the thread still working: the progress is news, delivered now.
    wait_for(
        "progress notice after the wait",
        Duration::from_secs(3),
        || {
            notices(&root)
                .iter()
                .any(|n| n["text"] == "Progress from /root/a: halfway there")
        },
    );
    // Waiting until it settles returns the answer; its completion notice is not sent.
    let v = call(&mut root, "agent_wait", json!({"path": "/root/a"}));
    assert_eq!(v["state"], "completed", "{v}");
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(notices(&root).len(), 1, "{:?}", notices(&root));
    drop(a);
    drop(root);
    w.finish(10);
}
