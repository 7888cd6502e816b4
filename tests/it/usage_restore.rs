//! Usage across a crash: what a dead serve never recorded is read back from the thread's Pi
//! session file by the restore pass, once, and the history a fork or an inherited context
//! copied into the file (older than the thread) is never counted.

use crate::support::common;
#[allow(unused_imports)]
use crate::support::sql::Rusqlite as _;

use serde_json::json;
use threadbase::domain::{SessionId, ThreadId};
use threadbase::engine::restore_dead_owners;
use threadbase::runtime::signals::ProcessIdentity;
use threadbase::store::usage::{self, Usage};
use threadbase::time::ms_from_iso;
use threadbase::Store;

fn message(ts: i64, input: i64, output: i64, cost: f64, tools: usize) -> serde_json::Value {
    let mut content = vec![json!({"type": "text", "text": "ok"})];
    for n in 0..tools {
        content.push(
            json!({"type": "toolCall", "id": format!("c{n}"), "name": "bash", "arguments": {}}),
        );
    }
    json!({"role": "assistant", "content": content, "api": "openai-completions",
           "provider": "fake", "model": "fake-model",
           "usage": {"input": input, "output": output, "cacheRead": 3, "cacheWrite": 0,
                     "reasoning": 0, "totalTokens": input + output + 3,
                     "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0,
                              "total": cost, "totalFromProvider": false}},
           "stopReason": if tools > 0 { "toolUse" } else { "stop" }, "timestamp": ts})
}

#[test]
fn restore_counts_what_a_dead_serve_never_recorded_and_only_that() {
    let db = common::temp_db();
    let store = Store::open(&db.path).unwrap();
    let m = common::manager(&store, "ses_root");
    let id = ThreadId::new(common::tid(1));
    common::add(&store, &[common::thread(id.as_str(), m, "/root/a", true)]);
    let conn = store.read().unwrap();
    let created: String = conn
        .query_row("SELECT created_at FROM threads WHERE id = ?1", [&id], |r| {
            r.get(0)
        })
        .unwrap();
    drop(conn);
    let t0 = ms_from_iso(&created).unwrap();

    // The session file: one copied message (older than the thread), one the serve recorded,
    // two it never did (completed after its last commit).
    let counted = message(t0 + 5, 100, 10, 0.25, 1);
    let entries = [
        message(t0 - 60_000, 9_999, 9_999, 9.0, 0),
        counted.clone(),
        message(t0 + 9, 200, 20, 0.5, 2),
        message(t0 + 12, 300, 30, 0.125, 0),
    ];
    let file = db.dir.path().join("a.jsonl");
    let mut text = json!({"type": "session", "version": 3, "id": "ses_a", "timestamp": created, "cwd": "/tmp"}).to_string();
    text.push('\n');
    let mut parent = serde_json::Value::Null;
    for (n, msg) in entries.iter().enumerate() {
        let id = format!("e{n}");
        text.push_str(&json!({"type": "message", "id": id, "parentId": parent, "timestamp": created, "message": msg}).to_string());
        text.push('\n');
        parent = json!(id);
    }
    std::fs::write(&file, text).unwrap();

    // The row as a serve left it when it died: live, its owner gone, one message counted.
    let me = ProcessIdentity::current();
    store
        .write(|tx| {
            tx.execute_script(&crate::support::sql::with(
                "UPDATE threads SET session_file = ?1, owner_pid = ?2, owner_started_at = ?3 WHERE id = ?4",
                rusqlite::params![file.display().to_string(), me.pid, me.started_at - 1, id]))?;
            usage::add(tx, &id, &Usage::of_assistant_message(&counted), &created)
        })
        .unwrap();

    let report = restore_dead_owners(&store, me).unwrap();
    assert_eq!(report.restored, vec![id.clone()]);
    let conn = store.read().unwrap();
    let got = usage::of_thread(&conn, &id).unwrap().unwrap();
    assert_eq!(
        got,
        Usage {
            input_tokens: 600,
            output_tokens: 60,
            cache_read_tokens: 9,
            cache_write_tokens: 0,
            cost_usd: 0.25 + (0.5 + 0.125),
            turns: 3,
            tool_calls: 3,
        }
    );
    let tree = usage::tree_spend(
        &conn,
        usage::TreeOf {
            thread_id: Some(&id),
            self_id: None,
            session_id: &SessionId::new("x"),
        },
    )
    .unwrap();
    assert_eq!((tree.root_session.as_str(), tree.usage), ("ses_root", got));
    drop(conn);

    // A second pass finds nothing to restore and counts nothing again.
    let again = restore_dead_owners(&store, me).unwrap();
    assert!(again.restored.is_empty(), "{again:?}");
    let conn = store.read().unwrap();
    assert_eq!(usage::of_thread(&conn, &id).unwrap().unwrap(), got);
}
