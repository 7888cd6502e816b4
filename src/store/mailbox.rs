//! Typed access to the `mailbox` rows a session's caller receives: completion and progress
//! notices and worker reports (direction `to_parent`, no agent recipient), which the row
//! watcher emits. Contract B's notices and steering are in [`super::agents::mailbox`];
//! contract C's keyed messages in [`super::workers`].

use rusqlite::Connection;

use crate::domain::{MailKind, ThreadId};
use crate::error::Result;
use crate::time::now_iso;

/// One notice due to a session's caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub id: i64,
    pub thread_id: ThreadId,
    pub kind: MailKind,
    pub message_id: Option<String>,
    pub body: String,
    pub created_at: String,
    /// The thread's path.
    pub path: String,
}

/// The notices due to the caller of session `session_id`, oldest first.
pub fn pending_notices(conn: &Connection, session_id: &str) -> Result<Vec<Notice>> {
    let mut stmt = conn.prepare_cached(include_str!("../../sql/notices_pending.sql"))?;
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
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Claims a pending notice for delivery; only the claim that changes the row may emit it.
pub fn claim_notice(conn: &Connection, id: i64) -> Result<bool> {
    Ok(conn
        .prepare_cached(include_str!("../../sql/notice_delivered.sql"))?
        .execute((id, now_iso()))?
        > 0)
}
