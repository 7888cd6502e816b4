//! Contract B's 0.19 additions (issue 29) through real `threadbase serve` processes with
//! scripted children: the view's new fields, report-only timeouts, reap, per-type models, tools
//! and extensions, and the final recap. The world and helpers are `serve_agent`'s.


use serde_json::{json, Value};

use crate::serve_agent::{call, fail, notices, spawn, spawn_detached, wait_for, world};

/// The view carries 0.19's fields after the tokens (`model`, `thinkingLevel`, `costUsd`,
/// `costId`), `costId` is the thread's own id, and a cut output ends with `outputTruncated`.
#[test]
fn the_view_has_the_019_fields_and_compact_cuts_output_at_16000() {
    let w = world();
    let mut root = w.root("quick", &[]);
    let long_task = "x".repeat(16_100);
    let v = spawn(&mut root, "long", &long_task);
    assert_eq!(v["state"], "completed");
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "path",
            "parent",
            "owner",
            "type",
            "state",
            "task",
            "status",
            "output",
            "createdAt",
            "updatedAt",
            "sessionFile",
            "inputTokens",
            "outputTokens",
            "costUsd",
            "costId",
            "outputTruncated"
        ],
        "{v}"
    );
    assert_eq!(v["outputTruncated"], true);
    assert_eq!(v["output"].as_str().unwrap().chars().count(), 16_000);
    let id = &w.sql("SELECT id FROM threads WHERE path = '/root/long'")[0][0];
    assert_eq!(&v["costId"], id);
    // agent_output still pages the whole answer.
    let page = call(
        &mut root,
        "agent_output",
        json!({"path": "long", "offset": 16_000}),
    );
    assert_eq!(page["totalCharacters"], 16_110);
    // A short answer is not cut and has no outputTruncated.
    let v = spawn(&mut root, "short", "y");
    assert!(v.get("outputTruncated").is_none(), "{v}");
    assert_eq!(v["output"], "answer to y");
    drop(root);
    w.finish(10);
}
