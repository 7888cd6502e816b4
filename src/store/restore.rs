//! Typed access to what the restore pass reads and writes: the live threads whose owner may
//! be gone, contract B's reserved runs never launched, and the close of one as stale.

use crate::store::db::{named, params, q};
use crate::store::Conn;

use crate::domain::{Contract, ManagerId, ThreadId};
use crate::error::Result;
use crate::store::rows::columns;

columns! {
    /// A live thread the restore pass looks at (`{restore_candidate_row}` in
    /// `sql/restore_candidates.sql`, which reads `threads t JOIN managers m`; the owner is the
    /// thread's, else its manager's): what [`Candidate`] holds.
    pub mod candidate_col as "{restore_candidate_row}" {
        ID = "t.id",
        MANAGER_ID = "t.manager_id",
        CONTRACT = "m.contract",
        PID = "t.pid",
        PGID = "t.pgid",
        PROCESS_STARTED_AT = "t.process_started_at",
        OWNER_PID = "CASE WHEN t.owner_pid IS NOT NULL THEN t.owner_pid ELSE m.owner_pid END AS owner_pid",
        OWNER_STARTED_AT = "CASE WHEN t.owner_pid IS NOT NULL THEN t.owner_started_at ELSE m.owner_started_at END AS owner_started_at",
        OWNER_HOST = "CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END AS host_id",
        OWNER_BOOT = "CASE WHEN t.owner_pid IS NOT NULL THEN t.boot_id ELSE m.boot_id END AS boot_id",
        LAUNCH_SEQ = "t.launch_seq",
        SESSION_FILE = "t.session_file",
        CREATED_AT = "t.created_at",
    }
}

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
    /// The host and boot of the owner and the thread's process (`None`: this host's).
    pub owner_host: Option<String>,
    pub owner_boot: Option<String>,
    pub launch_seq: i64,
    pub session_file: Option<String>,
    pub created_at: String,
}

/// Every live thread, with its owner.
pub fn candidates(conn: &Conn) -> Result<Vec<Candidate>> {
    let rows = conn
        .all(q!("restore_candidates", candidate_col), params![], |r| {
            Ok(Candidate {
                id: r.get(candidate_col::ID)?,
                manager_id: r.get(candidate_col::MANAGER_ID)?,
                contract: r.get(candidate_col::CONTRACT)?,
                pid: r.get(candidate_col::PID)?,
                pgid: r.get(candidate_col::PGID)?,
                process_started_at: r.get(candidate_col::PROCESS_STARTED_AT)?,
                owner_pid: r.get(candidate_col::OWNER_PID)?,
                owner_started_at: r.get(candidate_col::OWNER_STARTED_AT)?,
                owner_host: r.get(candidate_col::OWNER_HOST)?,
                owner_boot: r.get(candidate_col::OWNER_BOOT)?,
                launch_seq: r.get(candidate_col::LAUNCH_SEQ)?,
                session_file: r.get(candidate_col::SESSION_FILE)?,
                created_at: r.get(candidate_col::CREATED_AT)?,
            })
        })?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

columns! {
    /// A contract B run reserved but never launched (`{unlaunched_agent_row}` in
    /// `sql/agent_restore_candidates.sql`, which reads `threads t`): what [`Unlaunched`] holds.
    pub mod unlaunched_col as "{unlaunched_agent_row}" {
        ID = "t.id",
        MANAGER_ID = "t.manager_id",
        OWNER_PID = "t.owner_pid",
        OWNER_STARTED_AT = "t.owner_started_at",
        OWNER_HOST = "t.host_id",
        OWNER_BOOT = "t.boot_id",
    }
}

/// A contract B run reserved (starting) but never launched, and the serve that reserved it.
#[derive(Debug, Clone)]
pub struct Unlaunched {
    pub id: ThreadId,
    pub manager_id: ManagerId,
    pub owner_pid: Option<i64>,
    pub owner_started_at: Option<i64>,
    pub owner_host: Option<String>,
    pub owner_boot: Option<String>,
}

/// Contract B's reserved runs that no process ever started.
pub fn unlaunched_agents(conn: &Conn) -> Result<Vec<Unlaunched>> {
    let rows = conn
        .all(
            q!("agent_restore_candidates", unlaunched_col),
            params![],
            |r| {
                Ok(Unlaunched {
                    id: r.get(unlaunched_col::ID)?,
                    manager_id: r.get(unlaunched_col::MANAGER_ID)?,
                    owner_pid: r.get(unlaunched_col::OWNER_PID)?,
                    owner_started_at: r.get(unlaunched_col::OWNER_STARTED_AT)?,
                    owner_host: r.get(unlaunched_col::OWNER_HOST)?,
                    owner_boot: r.get(unlaunched_col::OWNER_BOOT)?,
                })
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

/// Pauses a reserved contract B run with `paused_status`; false when it changed meanwhile.
pub fn pause_unlaunched(conn: &Conn, id: &ThreadId, paused_status: &str, at: &str) -> Result<bool> {
    Ok(conn.execute(
        q!("agent_restore_unlaunched"),
        named! {":paused_status": paused_status, ":at": at, ":id": id},
    )? > 0)
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
    Ok(conn.execute(
        q!("restore_close_stale"),
        named! {
            ":message": message, ":at": at, ":paused_status": paused_status,
            ":id": id, ":launch": launch_seq,
        },
    )? > 0)
}
