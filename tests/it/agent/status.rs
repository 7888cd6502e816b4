//! `agent_status`: the view's fields (the original's and 0.19's), the list in spawn order, the
//! root's pseudo-view, and the failed and stopped values.

use super::{call, notices, spawn, spawn_detached, wait_for, world};
use serde_json::{json, Value};
use std::time::Duration;

/// The view's fields (owner, type, epoch-ms times), the failed and stopped values, the list in
/// spawn order, the root's pseudo-view, and notices that end as the original's.
#[test]
fn views_lists_and_notices_are_the_originals() {
    let w = world();
    let before = threadbase::time::now_ms();
    let mut root = w.root("quick", &[]);
    // Spawn order, not path order: b before a.
    let b = call(
        &mut root,
        "agent_spawn",
        json!({"path": "b", "type": "reviewer", "task": "review"}),
    );
    assert_eq!(b["type"], "reviewer");
    assert_eq!(b["owner"], "/root");
    let created = b["createdAt"].as_i64().expect("createdAt is a number");
    let updated = b["updatedAt"].as_i64().expect("updatedAt is a number");
    let after = threadbase::time::now_ms();
    assert!(
        before <= created && created <= updated && updated <= after,
        "{b}"
    );
    let keys: Vec<&str> = b.as_object().unwrap().keys().map(String::as_str).collect();
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
            "thinkingLevel",
            "costUsd",
            "costId"
        ],
        "{b}"
    );
    spawn(&mut root, "a", "work");
    let k = spawn(&mut root, "/k", "solo");
    assert_eq!((&k["parent"], &k["owner"]), (&Value::Null, &json!("/root")));
    // Retiring a settled child's process touches its row (and so `updatedAt`): wait for all
    // three, so that the two lists below read the same rows.
    wait_for("processes retired", Duration::from_secs(10), || {
        w.sql("SELECT count(*) FROM threads WHERE status = 'live'")[0][0] == json!(0)
    });
    let list = call(&mut root, "agent_status", json!({}));
    let paths: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/root/b", "/root/a", "/k"]);
    // An empty path lists too, as the original's `params.path ? get : list` does.
    assert_eq!(call(&mut root, "agent_status", json!({"path": ""})), list);
    // /root from the root: the original's pseudo-view of the main session.
    let main = call(&mut root, "agent_status", json!({"path": "/root"}));
    let now = main["updatedAt"].as_i64().unwrap();
    assert!(now >= after, "{main}");
    assert_eq!(
        main,
        json!({"path": "/root", "parent": null, "owner": "/root", "type": "main",
               "state": "running", "task": "Main Pi session", "status": "main",
               "createdAt": 0, "updatedAt": now})
    );
    assert_eq!(
        call(&mut root, "agent_output", json!({"path": "/root"})),
        json!({"path": "/root", "text": "", "totalCharacters": 0, "nextOffset": null})
    );
    drop(root);

    // A failed thread's status is its error; its notice ends "Session retained …".
    let mut failing = w.root("failing", &[]);
    let f = spawn_detached(&mut failing, "f", "try");
    assert_eq!(f["state"], "starting", "{f}");
    wait_for("failed notice", Duration::from_secs(10), || {
        notices(&failing).iter().any(|n| n["path"] == "/root/f")
    });
    let f = call(&mut failing, "agent_status", json!({"path": "f"}));
    assert_eq!(f["state"], "failed", "{f}");
    let error = f["error"].as_str().unwrap();
    assert!(error.contains("model exploded"), "{f}");
    assert_eq!(f["status"], error);
    let n = notices(&failing);
    assert_eq!(
        n[0]["text"],
        format!("Agent /root/f is failed: {error}. Session retained for further input.")
    );
    drop(failing);

    // A stopped run keeps the aborted run's error.
    let mut slow = w.root("slow", &[]);
    spawn_detached(&mut slow, "s", "long");
    let s = call(&mut slow, "agent_stop", json!({"path": "s"}));
    assert_eq!(s["state"], "stopped", "{s}");
    assert_eq!(s["status"], "Stopped; session retained");
    assert_eq!(s["error"], "Subagent run aborted");
    drop(slow);
    w.finish(15);
}

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
            "thinkingLevel",
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

/// Issue 33, two hosts of one team database: a thread held on a host whose lease ran out is
/// listed and shown with `hostUnreachable` (`{hostId, since}`) by `agent_status` on another
/// host; the views of one host have no such field.
#[test]
fn a_thread_of_an_unreachable_host_says_so_in_its_view() {
    let w = world();
    let mut b = w.root("quick", &[("THREADBASE_HOST_ID", "host-b")]);
    spawn_detached(&mut b, "a", "go");
    wait_for("a launched", Duration::from_secs(20), || {
        w.sql("SELECT count(*) FROM threads WHERE path = '/root/a' AND status = 'live' AND pid IS NOT NULL")[0][0]
            == json!(1)
    });
    let listed = call(&mut b, "agent_status", json!({}));
    assert!(!listed.to_string().contains("hostUnreachable"), "{listed}");
    // Host B's serve dies and its lease runs out (its last heartbeat moved back).
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    crate::support::sql::exec(
        &w.base.db,
        "UPDATE host_serves SET heartbeat_at = '2026-01-01T00:00:00.000Z' WHERE host_id = 'host-b'",
    );
    let mut a = w.root("quick", &[("THREADBASE_HOST_ID", "host-a")]);
    let want = json!({"hostId": "host-b", "since": "2026-01-01T00:00:00.000Z"});
    let one = call(&mut a, "agent_status", json!({"path": "a"}));
    assert_eq!(one["hostUnreachable"], want, "{one}");
    let listed = call(&mut a, "agent_status", json!({}));
    let a_view = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["path"] == "/root/a")
        .unwrap()
        .clone();
    assert_eq!(a_view["hostUnreachable"], want, "{listed}");
    a.close(Duration::from_secs(20));
}
