//! Contract B's tests that cross its verbs, so belong to no one of them: pause, update, steer
//! and a stop cascading across serves in one tree, and the original's error texts of every
//! method.

use super::Says::{Any, Has, Starts};
use super::{call, notices, refused, refused_all, spawn, spawn_detached, wait_for, world};
use crate::support::serve_client::session_user_texts as user_texts;
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[test]
fn pause_update_steer_fail_and_stop_cascade_across_serves() {
    let w = world();
    let mut root = w.root("slow", &[]);
    // /root/a works; its own serve spawns /root/a/b (slow) and /root/a/c (quick).
    spawn_detached(&mut root, "a", "lead");
    let mut a = w.child("/root/a", "slow");
    let mut a_quick = w.child("/root/a", "quick");
    spawn_detached(&mut a, "b", "dig");
    let c = spawn(&mut a_quick, "c", "check");
    assert_eq!(c["state"], "completed");

    // Progress from a child reaches the parent's serve as a notice, quickly.
    let sent = Instant::now();
    let v = call(&mut a, "agent_update", json!({"message": "halfway there"}));
    assert_eq!(v["status"], "halfway there");
    wait_for("progress notice", Duration::from_secs(5), || {
        notices(&root)
            .iter()
            .any(|n| n["text"] == "Progress from /root/a: halfway there")
    });
    eprintln!(
        "agent_update → parent notice: {} ms",
        sent.elapsed().as_millis()
    );
    // The completion of /root/a/c was addressed to /root/a, not to the root; /root/a's
    // blocking spawn already returned it, so it was marked delivered without being sent.
    let c_notice = w.sql(
        "SELECT mb.recipient_path, mb.state FROM mailbox mb JOIN threads t ON t.id = mb.thread_id
         WHERE t.path = '/root/a/c' AND mb.direction = 'to_parent'",
    );
    assert_eq!(c_notice, vec![vec![json!("/root/a"), json!("delivered")]]);
    assert!(!notices(&root).iter().any(|n| n["path"] == "/root/a/c"));
    assert!(!notices(&a)
        .iter()
        .chain(notices(&a_quick).iter())
        .any(|n| n["path"] == "/root/a/c"));

    // Stop /root/a from the root: /root/a/b (held by another serve) is stopped through a
    // command row, /root/a/c stays completed, /root/a is stopped.
    let v = call(&mut root, "agent_stop", json!({"path": "/root/a"}));
    assert_eq!(v["state"], "stopped", "{v}");
    assert_eq!(v["status"], "Stopped; session retained");
    // The root stopped it itself and got the stopped view: no notice repeats that.
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        !notices(&root)
            .iter()
            .any(|n| n["path"] == "/root/a" && n["state"] == "stopped"),
        "{:?}",
        notices(&root)
    );
    let st = call(&mut root, "agent_status", json!({}));
    let state_of = |p: &str| {
        st.as_array()
            .unwrap()
            .iter()
            .find(|t| t["path"] == p)
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(state_of("/root/a/b"), "stopped");
    assert_eq!(state_of("/root/a/c"), "completed");
    assert_eq!(
        w.sql("SELECT count(*) FROM commands WHERE kind = 'stop' AND state = 'done'")[0][0],
        1
    );
    // Steering under the stopped ancestor is refused; resuming the ancestor first works.
    refused(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a/b", "message": "go on"}),
        Some("conflict"),
        Any,
    );
    let v = call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a", "message": "carry on"}),
    );
    assert_eq!(
        (&v["state"], &v["status"]),
        (&json!("starting"), &json!("Starting"))
    );

    // Pause from the child: it settles paused with the reason at the end of its run.
    let p = call(
        &mut a,
        "agent_pause",
        json!({"reason": "need the API decision"}),
    );
    assert_eq!(
        p,
        json!({"path": "/root/a", "pauseRequested": true, "status": "need the API decision"})
    );
    // The root is not waiting, so the paused settlement reaches it as a notice.
    wait_for("paused notice", Duration::from_secs(5), || {
        notices(&root).iter().any(|n| {
            n["text"] == "Agent /root/a is paused: need the API decision. No answer handback; send input to resume the same session."
        })
    });
    let v = call(&mut root, "agent_wait", json!({"path": "/root/a"}));
    assert_eq!(v["state"], "paused");
    assert_eq!(v["status"], "need the API decision");
    assert!(v.get("output").is_none());
    let out = call(&mut root, "agent_output", json!({"path": "/root/a"}));
    assert_eq!(out["text"], "");
    // A wait with a timeout returns the current view and never kills.
    call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a", "message": "use REST"}),
    );
    let t0 = Instant::now();
    let v = call(
        &mut root,
        "agent_wait",
        json!({"path": "/root/a", "timeoutMs": 300}),
    );
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(v["state"], "running");
    // Steering a running thread goes into Pi's steering queue of the same run.
    call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a", "message": "also add docs"}),
    );
    let v = call(&mut root, "agent_wait", json!({"path": "/root/a"}));
    assert_eq!(v["state"], "completed");
    let file = PathBuf::from(v["sessionFile"].as_str().unwrap());
    let texts = user_texts(&file);
    for m in ["lead", "carry on", "use REST", "also add docs"] {
        assert_eq!(
            texts.iter().filter(|t| *t == m).count(),
            1,
            "{m}: {texts:?}"
        );
    }
    assert_eq!(
        w.sql("SELECT count(*) FROM mailbox WHERE direction = 'to_child' AND state <> 'delivered'")
            [0][0],
        0
    );

    // A model error: failed, error kept; a steer resumes it.
    let mut failing = w.root("failing", &[]);
    let v = spawn(&mut failing, "f", "try");
    assert_eq!(v["state"], "failed");
    assert!(
        v["error"].as_str().unwrap().contains("model exploded"),
        "{v}"
    );
    drop((a, a_quick, failing));
    drop(root);
    w.finish(15);
}

/// The original's error texts, word for word, each followed by threadbase's ` Repair: …`.
#[test]
fn error_texts_are_the_originals() {
    let w = world();
    let mut root = w.root("quick", &[]);
    let unknown = Some("unknown_reference");
    let invalid = Some("invalid_params");
    refused_all(
        &mut root,
        vec![
            (
                "agent_status",
                json!({"path": "nope"}),
                unknown,
                Starts("Unknown thread /root/nope. Repair:"),
            ),
            (
                "agent_wait",
                json!({"path": "/root/nope"}),
                None,
                Starts("Unknown thread /root/nope. Repair:"),
            ),
            (
                "agent_output",
                json!({"path": "/k"}),
                None,
                Starts("Unknown thread /k. Repair:"),
            ),
            (
                "agent_spawn",
                json!({"path": "/root/x/y", "type": "worker", "task": "t"}),
                unknown,
                Starts("Unknown thread /root/x. Repair:"),
            ),
            (
                "agent_spawn",
                json!({"path": "x", "task": "t"}),
                invalid,
                Has("type is required"),
            ),
            (
                "agent_spawn",
                json!({"path": "x", "type": "worker", "task": " \n"}),
                None,
                Starts("Task must not be empty. Repair:"),
            ),
        ],
    );
    spawn(&mut root, "done", "t");
    let not_mine = Starts(
        "/root may address only its descendants (not siblings, unrelated trees or ancestors). Repair:",
    );
    let forbidden = Some("forbidden");
    refused_all(
        &mut root,
        vec![
            (
                "agent_steer",
                json!({"path": "done", "message": "  "}),
                invalid,
                Starts("Steering message must not be empty. Repair:"),
            ),
            ("agent_wait", json!({"path": "/root"}), forbidden, not_mine),
            ("agent_stop", json!({"path": "/root"}), forbidden, not_mine),
            (
                "agent_steer",
                json!({"path": "/root", "message": "hi"}),
                forbidden,
                not_mine,
            ),
            (
                "agent_update",
                json!({"message": "hi"}),
                None,
                Starts("Unknown thread /root. Repair:"),
            ),
            (
                "agent_pause",
                json!({"reason": "why"}),
                None,
                Starts("Unknown thread /root. Repair:"),
            ),
        ],
    );
    // A child that is not working may neither report progress nor pause.
    let mut done = w.child("/root/done", "quick");
    refused(
        &mut done,
        "agent_update",
        json!({"message": "hi"}),
        Some("forbidden"),
        Starts("Only a working child may report progress. Repair:"),
    );
    refused(
        &mut done,
        "agent_pause",
        json!({"reason": "why"}),
        None,
        Starts("Only a working child may pause itself. Repair:"),
    );
    // A serve whose agent path is not in the registry.
    let mut stranger = w.child("/root/ghost", "quick");
    refused(
        &mut stranger,
        "agent_update",
        json!({"message": "hi"}),
        None,
        Starts("Unknown thread /root/ghost. Repair:"),
    );
    drop((done, stranger));
    drop(root);
    w.finish(15);
}
