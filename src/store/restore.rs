//! Typed access to what the restore pass reads and writes: the live threads whose owner may
//! be gone, contract B's reserved runs never launched, and the close of one as stale.

use crate::store::Conn;
use rusqlite::named_params;

use crate::domain::{Contract, ManagerId, ThreadId};
use crate::error::Result;

/// A live thread the restore pass looks at: its process and the serve that held it.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub id: ThreadId,
    pub manager_id: ManagerId,
    pub contract: Contract,
    pub pid: Option<i64>,
    pub pgid: Option<i64>,
    pub process_started_at: Option<i64>,
    pub owner_pid: Option<i64>,
    pub owner_started_at: Option<i64>,
    pub launch_seq: i64,
    pub session_file: Option<String>,
    pub created_at: String,
}

/// Every live thread, with its owner.
pub fn candidates(conn: &Conn) -> Result<Vec<Candidate>> {
    let mut stmt = conn
        .db()
        .prepare_cached(include_str!("../../sql/restore_candidates.sql"))?;
    let rows = stmt.query_map([], |r| {
        Ok(Candidate {
            id: r.get("id")?,
            manager_id: r.get("manager_id")?,
            contract: r.get("contract")?,
            pid: r.get("pid")?,
            pgid: r.get("pgid")?,
            process_started_at: r.get("process_started_at")?,
            owner_pid: r.get("owner_pid")?,
            owner_started_at: r.get("owner_started_at")?,
            launch_seq: r.get("launch_seq")?,
            session_file: r.get("session_file")?,
            created_at: r.get("created_at")?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A contract B run reserved (starting) but never launched, and the serve that reserved it.
#[derive(Debug, Clone)]
pub struct Unlaunched {
    pub id: ThreadId,
    pub manager_id: ManagerId,
    pub owner_pid: Option<i64>,
    pub owner_started_at: Option<i64>,
}

/// Contract B's reserved runs that no process ever started.
pub fn unlaunched_agents(conn: &Conn) -> Result<Vec<Unlaunched>> {
    let mut stmt = conn
        .db()
        .prepare_cached(include_str!("../../sql/agent_restore_candidates.sql"))?;
    let rows = stmt.query_map([], |r| {
        Ok(Unlaunched {
            id: r.get(0)?,
            manager_id: r.get(1)?,
            owner_pid: r.get(2)?,
            owner_started_at: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Pauses a reserved contract B run with `paused_status`; false when it changed meanwhile.
pub fn pause_unlaunched(conn: &Conn, id: &ThreadId, paused_status: &str, at: &str) -> Result<bool> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/agent_restore_unlaunched.sql"))?
        .execute(named_params! {":paused_status": paused_status, ":at": at, ":id": id})?
        > 0)
}

/// Closes launch `launch_seq` of a thread as stale with `message` (contract B: paused with
/// `paused_status`); false when it changed meanwhile.
pub fn close_stale(
    conn: &Conn,
    id: &ThreadId,
    launch_seq: i64,
    message: &str,
    paused_status: &str,
    at: &str,
) -> Result<bool> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/restore_close_stale.sql"))?
        .execute(named_params! {
            ":message": message, ":at": at, ":paused_status": paused_status,
            ":id": id, ":launch": launch_seq,
        })?
        > 0)
}
