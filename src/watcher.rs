//! Processes talk through rows (DESIGN principle 7). Another process that needs something done
//! by this `serve` writes a row: a notice for this session's caller (`mailbox`, direction
//! `to_parent`), a control request for a child whose pipes this process holds (`commands`), or
//! contract B's notices and steering (handed to [`AgentHost`]).
//! The watcher notices new commits by the database's change counter (`PRAGMA data_version` on a
//! connection of its own, which changes only when another connection commits) and carries the
//! rows out within [`POLL`], claiming each one in a transaction so it happens once.

use std::path::PathBuf;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use serde_json::json;

use crate::engine::agent::AgentHost;
use crate::error::Result;
use crate::output::Output;
use crate::runtime::Runtime;
use crate::store::Store;
use crate::time::now_iso;

/// How often the change counter is read.
pub const POLL: Duration = Duration::from_millis(50);

/// Watches the database for rows addressed to `session_id` (notices, emitted on `out`), to
/// the children `runtime` owns (commands) and to this serve's contract B side, until `out`
/// closes.
pub async fn run(
    db: PathBuf,
    store: std::sync::Arc<Store>,
    runtime: Runtime,
    agent: std::sync::Arc<AgentHost>,
    session_id: String,
    out: Output,
) {
    let Ok(conn) = Connection::open_with_flags(
        &db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) else {
        tracing::error!(
            "the row watcher could not open {}; cross-process notices are off",
            db.display()
        );
        return;
    };
    let _ = conn.busy_timeout(crate::store::BUSY_TIMEOUT);
    let mut seen: Option<i64> = None;
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            // Notices held back by a request were released: deliver what is still due now,
            // even if nothing else committed.
            _ = agent.notices_released() => seen = None,
        }
        if out.is_closed() {
            return;
        }
        let version: i64 = match conn.query_row("PRAGMA data_version", [], |r| r.get(0)) {
            Ok(v) => v,
            Err(_) => continue,
        };
        if seen == Some(version) {
            continue;
        }
        seen = Some(version);
        if let Err(e) = deliver_notices(&conn, &store, &session_id, &out) {
            tracing::warn!("delivering notices failed: {e}");
        }
        match pending_commands(&conn, &runtime) {
            Ok(pending) => {
                if let Err(e) = run_commands(pending, &store, &runtime).await {
                    tracing::warn!("running commands failed: {e}");
                }
            }
            Err(e) => tracing::warn!("reading commands failed: {e}"),
        }
        match agent.rows_changed(&conn, &out) {
            Ok((steer_ids, settled)) => agent.sweep(steer_ids, settled).await,
            Err(e) => tracing::warn!("reading agent rows failed: {e}"),
        }
    }
}

/// One pending notice row.
struct Notice {
    id: i64,
    thread_id: String,
    kind: String,
    message_id: Option<String>,
    body: String,
    created_at: String,
    path: String,
}

fn deliver_notices(conn: &Connection, store: &Store, session_id: &str, out: &Output) -> Result<()> {
    let pending: Vec<Notice> = {
        let mut stmt = conn.prepare_cached(include_str!("../sql/notices_pending.sql"))?;
        let rows = stmt.query_map([session_id], |r| {
            Ok(Notice {
                id: r.get(0)?,
                thread_id: r.get(1)?,
                kind: r.get(2)?,
                message_id: r.get(3)?,
                body: r.get(4)?,
                created_at: r.get(5)?,
                path: r.get(6)?,
            })
        })?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for Notice {
        id,
        thread_id,
        kind,
        message_id,
        body,
        created_at,
        path,
    } in pending
    {
        let claimed = store.write(|tx| {
            Ok(tx
                .prepare_cached(include_str!("../sql/notice_delivered.sql"))?
                .execute((id, now_iso()))?
                > 0)
        })?;
        if claimed {
            let _ = out.send(json!({"method": "notice", "params": {
                "threadId": thread_id, "path": path, "kind": kind, "messageId": message_id,
                "text": body, "createdAt": created_at,
            }}));
        }
    }
    Ok(())
}

fn pending_commands(conn: &Connection, runtime: &Runtime) -> Result<Vec<(i64, String, String)>> {
    let me = runtime.owner();
    let mut stmt = conn.prepare_cached(include_str!("../sql/commands_pending.sql"))?;
    let rows = stmt.query_map((me.pid, me.started_at), |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

async fn run_commands(
    pending: Vec<(i64, String, String)>,
    store: &Store,
    runtime: &Runtime,
) -> Result<()> {
    for (id, thread_id, kind) in pending {
        let outcome = match kind.as_str() {
            "stop" | "force_stop" => {
                runtime
                    .stop(&thread_id, kind == "force_stop")
                    .await
                    .map(|live| {
                        if live {
                            "stopped".to_string()
                        } else {
                            "already closed".to_string()
                        }
                    })
            }
            _ => runtime
                .abort(&thread_id, Duration::from_millis(1_500))
                .await
                .map(|_| "interrupted".to_string()),
        };
        let (state, result) = match outcome {
            Ok(r) => ("done", r),
            Err(e) => ("failed", e.message),
        };
        store.write(|tx| {
            tx.prepare_cached(include_str!("../sql/command_done.sql"))?
                .execute((id, state, result, now_iso()))?;
            Ok(())
        })?;
    }
    Ok(())
}
