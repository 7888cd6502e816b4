//! Contract C's tests that cross its methods, so belong to no one of them: interrupt, hide,
//! snapshot and restore in one coordinator's session, and the error texts of every method.

use super::{
    call, error, message, spawn_params, tool, world, COORD, K1_MESSAGE, QUICK, REVIEW_WORKER,
};
use crate::support::serve_client::top_status;
use serde_json::{json, Value};
use std::time::Duration;

#[test]
fn interrupt_hide_restore_and_snapshot() {
    let w = world(r#"{"turns": [{"steps": [{"delay_ms": 30000}, {"text": "late"}]}]}"#);
    let mut s = w.serve(COORD, &[("THREADBASE_MAX_WORKERS", "1")]);
    let v = tool(
        &mut s,
        "threads_spawn",
        spawn_params(&w, "slow", "Slow work"),
    );
    let slow = v["workerID"].as_str().unwrap().to_string();
    assert_eq!(v["outcome"], Value::Null);
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(top_status(&w.base.db, &list, &slow), "running");
    let e = error(&mut s, "threads_spawn", spawn_params(&w, "next", "Next"));
    assert_eq!(e["code"], "limit");
    let v = tool(&mut s, "threads_interrupt", json!({"workerID": slow}));
    assert_eq!(v["outcome"], "interrupted");
    assert_eq!(v["hidden"], false);
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(top_status(&w.base.db, &list, &slow), "interrupted");
    // The interrupted worker frees its slot; interrupting an idle worker changes nothing.
    let next = tool(&mut s, "threads_spawn", spawn_params(&w, "next", "Next"));
    let next_id = next["workerID"].as_str().unwrap().to_string();
    let v = tool(&mut s, "threads_interrupt", json!({"workerID": slow}));
    assert_eq!(v["outcome"], "interrupted");

    // hide keeps the worker listed and running.
    let v = tool(&mut s, "threads_hide", json!({"workerID": next_id}));
    assert_eq!(v["hidden"], true);
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(list["workers"].as_array().unwrap().len(), 2);
    assert_eq!(top_status(&w.base.db, &list, &next_id), "running");

    // A PASS report hides by default.
    let mut ws = w.serve(&slow, &[]);
    let r = tool(
        &mut ws,
        "threads_report",
        json!({"verdict": "PASS", "summary": "fine", "evidence": ["ok"]}),
    );
    assert_eq!(r["workerID"], slow.as_str());
    ws.close(Duration::from_secs(20));

    // snapshot: raw {workers}, read-only, any caller, unknown coordinators contribute nothing.
    let snap = call(
        &mut s,
        "threads.snapshot",
        json!({"coordinatorIDs": [COORD, "ses_nobody", COORD]}),
    );
    let workers = snap["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    let by_id = |id: &str| {
        workers
            .iter()
            .find(|v| v["workerID"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(by_id(&slow)["hidden"], true);
    assert_eq!(by_id(&slow)["report"]["verdict"], "PASS");
    assert_eq!(by_id(&next_id)["hidden"], true);
    assert_eq!(
        call(&mut s, "threads.snapshot", json!({"coordinatorIDs": []})),
        json!({"workers": []})
    );
    let e = error(
        &mut s,
        "threads.snapshot",
        json!({"coordinatorIDs": [COORD], "x": 1}),
    );
    assert_eq!(e["code"], "invalid_params");
    // restore: every hidden worker shows again, even the PASS one.
    let mut other = w.serve("ses_ui", &[]);
    let restored = call(
        &mut other,
        "threads.restore",
        json!({"coordinatorIDs": [COORD]}),
    );
    let hidden: Vec<&Value> = restored["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| &v["hidden"])
        .collect();
    assert_eq!(hidden, [&json!(false), &json!(false)]);
    assert_eq!(
        w.count("SELECT count(*) FROM threads WHERE coordinator_id IS NOT NULL AND hidden = 0"),
        2
    );
    other.close(Duration::from_secs(20));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

/// Error texts: the original's sentence (opzero1/threads), then what threadbase adds, the ids
/// the error concerns and a ` Repair: …` (docs/fidelity.md, "Contract C"); where the original lets another error through (OpenCode's session-not-found
/// for an unknown workerID, a schema error for a report from a session that is not a worker) the
/// sentence is threadbase's.
#[test]
fn error_texts_are_the_originals_sentence_then_ids_and_a_repair() {
    let w = world(QUICK);
    let mut s = w.serve(COORD, &[("THREADBASE_MAX_WORKERS", "1")]);
    // The text before ` Repair: `, and the repair.
    let split = |e: &Value| -> (String, String) {
        let (head, repair) = message(e)
            .split_once(" Repair: ")
            .unwrap_or_else(|| panic!("no Repair: in {e}"));
        assert!(!repair.trim().is_empty(), "{e}");
        (head.to_string(), repair.to_string())
    };
    let head = |e: &Value| split(e).0;

    let params = spawn_params(&w, "review", "Check");
    tool(&mut s, "threads_spawn", params.clone());
    let mut changed = params.clone();
    changed["task"] = json!("Other");
    let e = error(&mut s, "threads_spawn", changed);
    assert_eq!(
        head(&e),
        format!("This spawn key already belongs to a different request (worker {REVIEW_WORKER}).")
    );
    let e = error(&mut s, "threads_spawn", spawn_params(&w, "second", "More"));
    assert_eq!(head(&e), "Coordinator worker limit reached (1).");
    let mut relative = spawn_params(&w, "third", "x");
    relative["directory"] = json!("work");
    let e = error(&mut s, "threads_spawn", relative);
    assert_eq!(
        head(&e),
        r#"directory must be an existing absolute directory (got "work")."#
    );
    let mut granted = spawn_params(&w, "third", "x");
    granted["paths"] = json!(["refs"]);
    let e = error(&mut s, "threads_spawn", granted);
    assert_eq!(head(&e), "Granted path must be absolute: refs.");

    let send = json!({"workerID": REVIEW_WORKER, "key": "k1", "text": "Second"});
    tool(&mut s, "threads_send", send);
    let e = error(
        &mut s,
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "k1", "text": "Different"}),
    );
    assert_eq!(
        head(&e),
        format!("This send key already belongs to different text (message {K1_MESSAGE}).")
    );

    let mut other = w.serve("ses_other", &[]);
    let e = error(
        &mut other,
        "threads_hide",
        json!({"workerID": REVIEW_WORKER}),
    );
    let (h, repair) = split(&e);
    assert_eq!(h, "Only the owning coordinator may control this worker.");
    for id in [REVIEW_WORKER, COORD, "ses_other"] {
        assert!(repair.contains(id), "{e}");
    }
    other.close(Duration::from_secs(20));

    // threadbase's own sentences.
    let unknown = "ses_00000000000000000000000000000000";
    let e = error(&mut s, "threads_interrupt", json!({ "workerID": unknown }));
    assert_eq!(head(&e), format!("Unknown managed worker: \"{unknown}\"."));
    let report = json!({"verdict": "PASS", "summary": "s", "evidence": []});
    let e = error(&mut s, "threads_report", report.clone());
    assert_eq!(
        head(&e),
        format!(
            "Only a managed worker can call threads_report, and this session ({COORD}) is not one."
        )
    );

    // The report conflict: the original's two sentences, then the repair.
    let mut worker = w.serve(REVIEW_WORKER, &[]);
    tool(&mut worker, "threads_report", report);
    let e = error(
        &mut worker,
        "threads_report",
        json!({"verdict": "FAIL", "summary": "s", "evidence": []}),
    );
    assert_eq!(
        head(&e),
        "This worker already has a different report. Start a new task with a new spawn key."
    );
    worker.close(Duration::from_secs(20));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}
