//! `agent_stop`: it takes a thread in any state, and its working children with it.

use super::Says::{Any, Starts};
use super::{call, refused, spawn, spawn_detached, world};
use serde_json::json;

/// The golden case of the original's `tests/startup.test.ts`: a detached nested spawn answers
/// `starting`; stopping its settled parent stops the parent itself and the working child; the
/// stopped parent may not spawn. Here the parent has completed rather than been restored
/// paused: stop takes a thread in any state.
#[test]
fn golden_stop_takes_a_settled_parent_and_its_starting_child() {
    let w = world();
    let mut root = w.root("quick", &[]);
    let worker = spawn(&mut root, "worker", "work");
    assert_eq!(worker["state"], "completed");
    drop(root);
    let mut root = w.root("slow", &[]);
    let child = spawn_detached(&mut root, "worker/child", "nested");
    assert_eq!(child["state"], "starting", "{child}");
    assert_eq!(child["status"], "Starting");
    assert_eq!(child["owner"], "/root/worker");
    let stopped = call(&mut root, "agent_stop", json!({"path": "worker"}));
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    assert_eq!(stopped["status"], "Stopped; session retained");
    assert!(stopped.get("output").is_none(), "output removed: {stopped}");
    // The completed parent was not running, so it has no aborted run's error.
    assert!(stopped.get("error").is_none(), "{stopped}");
    let child = call(
        &mut root,
        "agent_status",
        json!({"path": "/root/worker/child"}),
    );
    assert_eq!(child["state"], "stopped", "{child}");
    assert_eq!(child["error"], "Subagent run aborted");
    // The stopped parent's own serve may not spawn ("working agent").
    let mut worker_serve = w.child("/root/worker", "quick");
    refused(
        &mut worker_serve,
        "agent_spawn",
        json!({"path": "late", "type": "worker", "task": "late"}),
        Some("forbidden"),
        Starts("Only a working agent may spawn children. Repair:"),
    );
    // Nor may the root spawn or steer beneath it until it is resumed.
    refused(
        &mut root,
        "agent_spawn",
        json!({"path": "/root/worker/late", "type": "worker", "task": "late", "wait": false}),
        Some("conflict"),
        Starts("Cannot continue under stopped ancestor /root/worker; resume it first. Repair:"),
    );
    refused(
        &mut root,
        "agent_steer",
        json!({"path": "/root/worker/child", "message": "go on"}),
        Some("conflict"),
        Any,
    );
    drop(worker_serve);
    drop(root);
    w.finish(15);
}

/// Stop in any state: a paused thread and a failed one become stopped (the failed one keeps
/// its error); after a resume, spawning beneath works again.
#[test]
fn stop_takes_paused_and_failed_threads_and_a_resume_lifts_it() {
    let w = world();
    let mut failing = w.root("failing", &[]);
    let f = spawn(&mut failing, "f", "try");
    assert_eq!(f["state"], "failed", "{f}");
    let error = f["error"].as_str().unwrap().to_string();
    let v = call(&mut failing, "agent_stop", json!({"path": "f"}));
    assert_eq!(v["state"], "stopped", "{v}");
    assert_eq!(v["status"], "Stopped; session retained");
    assert_eq!(v["error"], error.as_str(), "{v}");
    drop(failing);

    let mut root = w.root("slow", &[]);
    spawn_detached(&mut root, "p", "lead");
    let mut p = w.child("/root/p", "slow");
    call(&mut p, "agent_pause", json!({"reason": "need input"}));
    let v = call(&mut root, "agent_wait", json!({"path": "/root/p"}));
    assert_eq!(v["state"], "paused", "{v}");
    let v = call(&mut root, "agent_stop", json!({"path": "/root/p"}));
    assert_eq!(v["state"], "stopped", "{v}");
    assert_eq!(v["status"], "Stopped; session retained");
    assert_eq!(
        w.sql("SELECT agent_state FROM threads WHERE path = '/root/p'")[0][0],
        "stopped"
    );
    refused(
        &mut root,
        "agent_spawn",
        json!({"path": "/root/p/x", "type": "worker", "task": "t", "wait": false}),
        Some("conflict"),
        Any,
    );
    // Resuming the stopped thread lifts the refusal.
    let v = call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/p", "message": "carry on"}),
    );
    assert_eq!(v["state"], "starting", "{v}");
    let x = spawn_detached(&mut root, "/root/p/x", "t");
    assert_eq!(x["state"], "starting", "{x}");
    call(&mut root, "agent_stop", json!({"path": "/root/p"}));
    drop(p);
    drop(root);
    w.finish(15);
}
