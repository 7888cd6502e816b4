//! `agents.reap` (`/agents reap`) and `threadbase reap`: completed threads forgotten, their rows
//! kept.

use super::{call, fail, spawn, spawn_detached, world};
use serde_json::{json, Value};

fn threadbase(db: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `/agents reap` (serve's `agents.reap`) forgets completed threads with no descendant that
/// stays, oldest first: they leave agent_status, free their slot of the total limit and cannot
/// be resumed, while their rows (marked reaped), usage and session files stay. A completed
/// parent of a failed child stays, and so does the child. `threadbase reap [--dry-run]` does
/// the same from a shell.
#[test]
fn reap_forgets_completed_leaves_frees_slots_and_keeps_rows() {
    let w = world();
    let mut root = w.root("slow", &[("PI_SUBAGENTS_MAX_THREADS", "4")]);
    // /root/p works while its own serve spawns /root/p/q, which fails; then p completes.
    spawn_detached(&mut root, "p", "lead");
    let mut p = w.child("/root/p", "failing");
    let q = spawn(&mut p, "q", "dig");
    assert_eq!(q["state"], "failed");
    let v = call(&mut root, "agent_wait", json!({"path": "p"}));
    assert_eq!(v["state"], "completed");
    drop(p);
    let mut quick = w.root("quick", &[("PI_SUBAGENTS_MAX_THREADS", "4")]);
    let done1 = spawn(&mut quick, "done1", "one");
    let done2 = spawn(&mut quick, "done2", "two");
    assert_eq!(
        (&done1["state"], &done2["state"]),
        (&json!("completed"), &json!("completed"))
    );
    let file = done1["sessionFile"].as_str().unwrap().to_string();
    let (code, m) = fail(
        &mut quick,
        "agent_spawn",
        json!({"path": "x", "type": "worker", "task": "t"}),
    );
    assert_eq!(code, "limit");
    assert!(m.starts_with("Total thread limit reached."), "{m}");

    // Dry run: counts, changes nothing.
    let dry = call(&mut quick, "agents.reap", json!({"dryRun": true}));
    assert_eq!(
        dry,
        json!({"dryRun": true, "count": 2, "threads": ["/root/done1", "/root/done2"]})
    );
    let (ok, out, err) = threadbase(&w.base.db, &["reap", "--dry-run", "--json"]);
    assert!(ok, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["count"], 2, "{doc}");
    assert_eq!(doc["threads"][0]["path"], "/root/done1");
    assert_eq!(
        w.sql("SELECT count(*) FROM threads WHERE agent_reaped_at IS NOT NULL")[0][0],
        0
    );
    let reaped = call(&mut quick, "agents.reap", json!({}));
    assert_eq!(reaped["count"], 2, "{reaped}");
    // Forgotten: not listed, unknown, not resumable, the path stays taken.
    let all = call(&mut quick, "agent_status", json!({}));
    let paths: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/root/p", "/root/p/q"]);
    for (method, params) in [
        ("agent_status", json!({"path": "done1"})),
        ("agent_steer", json!({"path": "done1", "message": "again"})),
        ("agent_wait", json!({"path": "done1"})),
        ("agent_output", json!({"path": "done1"})),
    ] {
        let (code, m) = fail(&mut quick, method, params);
        assert_eq!(code, "unknown_reference", "{method}: {m}");
        assert!(m.starts_with("Unknown thread /root/done1. Repair:"), "{m}");
        assert!(m.contains("was reaped"), "{m}");
    }
    let (code, m) = fail(
        &mut quick,
        "agent_spawn",
        json!({"path": "done1", "type": "worker", "task": "t"}),
    );
    assert_eq!(code, "conflict");
    assert!(m.contains("was reaped"), "{m}");
    // Its slot is free.
    let x = spawn(&mut quick, "x", "t");
    assert_eq!(x["state"], "completed");
    // The rows, usage and session file stay.
    assert_eq!(
        w.sql(
            "SELECT t.path, t.agent_state, u.thread_id IS NOT NULL FROM threads t
             LEFT JOIN thread_usage u ON u.thread_id = t.id
             WHERE t.agent_reaped_at IS NOT NULL ORDER BY t.rowid"
        ),
        vec![
            vec![json!("/root/done1"), json!("completed"), json!(1)],
            vec![json!("/root/done2"), json!("completed"), json!(1)]
        ]
    );
    assert!(std::path::Path::new(&file).exists());
    // The shell command reaps what is left that may go: /root/x (p stays above failed q).
    let (ok, out, err) = threadbase(&w.base.db, &["reap"]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with("reaped 1 completed thread\n  /root/x  (session ses_main)"),
        "{out}"
    );
    let (ok, out, _) = threadbase(&w.base.db, &["reap", "--dry-run"]);
    assert!(ok);
    assert_eq!(out, "would reap 0 completed threads\n");
    // Only the main session reaps.
    let mut q_serve = w.child("/root/p/q", "quick");
    let (code, _) = fail(&mut q_serve, "agents.reap", json!({}));
    assert_eq!(code, "forbidden");
    drop(q_serve);
    drop(quick);
    drop(root);
    w.finish(10);
}
