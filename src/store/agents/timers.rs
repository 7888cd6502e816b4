//! Contract B's report-only timers (`timeoutMs` of agent_spawn and agent_steer): a deadline on
//! the thread's row, fired once by the serve that holds the run.

use crate::store::db::{named, q};
use crate::store::Conn;

use super::ProcessIdentity;
use crate::domain::ThreadId;
use crate::error::Result;
use crate::store::rows::columns;

/// Arms (or re-arms) a working thread's timer; false when the thread is not working or is
/// stopping (no timer then).
pub fn arm(conn: &Conn, id: &ThreadId, timeout_ms: u64, deadline_ms: i64) -> Result<bool> {
    Ok(conn.execute(
        q!("agent_timer_arm"),
        named! {":ms": timeout_ms as i64, ":at": deadline_ms, ":id": id},
    )? > 0)
}

/// The earliest deadline among the timers of the runs `owner` holds.
pub fn next_deadline(conn: &Conn, owner: ProcessIdentity) -> Result<Option<i64>> {
    conn.one(
        q!("agent_timer_next"),
        named! {
            ":pid": owner.pid, ":started": owner.started_at,
            ":host": crate::host::HostIdentity::here().host_id.as_str(),
            ":boot": crate::host::HostIdentity::here().boot_id.as_str(),
        },
        |r| r.get::<Option<i64>>(0),
    )
}

columns! {
    /// A timer whose deadline has passed (`{agent_due_timer_row}` in
    /// `sql/agent_timers_due.sql`, which reads `threads`): what [`DueTimer`] holds.
    pub mod due_col as "{agent_due_timer_row}" {
        ID = "id",
        PATH = "path",
        PARENT_PATH = "parent_path",
        SESSION_FILE = "session_file",
        TIMEOUT_MS = "agent_timeout_ms",
        DEADLINE_MS = "agent_timeout_at",
    }
}

/// A timer whose deadline has passed.
pub struct DueTimer {
    pub id: ThreadId,
    pub path: String,
    pub parent_path: Option<String>,
    pub session_file: Option<String>,
    pub timeout_ms: i64,
    pub deadline_ms: i64,
}

/// The timers of `owner`'s runs that are due at `now_ms`, earliest first.
pub fn due(conn: &Conn, owner: ProcessIdentity, now_ms: i64) -> Result<Vec<DueTimer>> {
    let rows = conn
        .all(
            q!("agent_timers_due", due_col),
            named! {
                ":pid": owner.pid, ":started": owner.started_at, ":now": now_ms,
                ":host": crate::host::HostIdentity::here().host_id.as_str(),
                ":boot": crate::host::HostIdentity::here().boot_id.as_str(),
            },
            |r| {
                Ok(DueTimer {
                    id: r.get(due_col::ID)?,
                    path: r.get(due_col::PATH)?,
                    parent_path: r.get(due_col::PARENT_PATH)?,
                    session_file: r.get(due_col::SESSION_FILE)?,
                    timeout_ms: r.get(due_col::TIMEOUT_MS)?,
                    deadline_ms: r.get(due_col::DEADLINE_MS)?,
                })
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

/// Clears the timer armed with `deadline_ms`: `Some(true)` when its thread is still working and
/// not stopping (its notice is due), `Some(false)` when it was just cleared, `None` when it was
/// re-armed or fired meanwhile.
pub fn fire(conn: &Conn, id: &ThreadId, deadline_ms: i64) -> Result<Option<bool>> {
    conn.opt(
        q!("agent_timer_fire"),
        named! {":id": id, ":at": deadline_ms},
        |r| r.get::<bool>(0),
    )
}

/// Sets a mailbox row's structured details (JSON).
pub fn set_mail_details(conn: &Conn, mailbox_id: i64, details: &str) -> Result<()> {
    conn.execute(
        q!("agent_mail_details"),
        named! {":details": details, ":id": mailbox_id},
    )?;
    Ok(())
}
