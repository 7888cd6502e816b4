//! Typed access to `commands`: actions one serve hands to the serve that holds a thread.

use crate::store::db::{params, q};
use crate::store::Conn;

pub use crate::domain::{CommandKind, CommandState};
use crate::domain::{ManagerId, ThreadId};
use crate::error::Result;
use crate::store::rows::columns;
use crate::time::now_iso;

/// Whether a send to `thread_id` is still waiting to be carried out or being carried out.
pub fn send_under_way(conn: &Conn, thread_id: &ThreadId) -> Result<bool> {
    conn.one(q!("command_send_under_way"), params![thread_id], |r| {
        r.get(0)
    })
}

/// Writes a command for the serve that holds (or, for a resume, manages) `thread_id`;
/// returns its id.
pub fn insert(
    conn: &Conn,
    thread_id: &ThreadId,
    kind: CommandKind,
    payload: Option<&str>,
) -> Result<i64> {
    conn.one(
        q!("command_insert"),
        params![thread_id, kind, payload, now_iso()],
        |r| r.get(0),
    )
}

/// Asks the serve that holds `thread_id`'s process for a stop, forced stop or interrupt,
/// carried out at once by its watcher (nobody waits on the row).
pub fn request(conn: &Conn, thread_id: &ThreadId, kind: CommandKind) -> Result<()> {
    conn.execute(q!("command_request"), params![thread_id, kind, now_iso()])?;
    Ok(())
}

columns! {
    /// A command waiting for its serve (`{pending_command_row}` in `sql/commands_pending.sql`,
    /// which reads `commands c`): what [`PendingCommand`] holds.
    pub mod pending_col as "{pending_command_row}" {
        ID = "c.id",
        THREAD_ID = "c.thread_id",
        KIND = "c.kind",
        PAYLOAD = "c.payload",
    }
}

/// One command waiting for the serve that runs [`pending`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingCommand {
    pub id: i64,
    pub thread_id: ThreadId,
    pub kind: CommandKind,
    pub payload: Option<String>,
}

/// The commands waiting for the serve `owner`: for the threads whose process it holds, and
/// the resumes of closed threads of its manager `manager_id`; oldest first.
pub fn pending(
    conn: &Conn,
    owner: (i64, i64),
    manager_id: ManagerId,
) -> Result<Vec<PendingCommand>> {
    let rows = conn
        .all(
            q!("commands_pending", pending_col),
            params![
                owner.0,
                owner.1,
                manager_id,
                crate::host::HostIdentity::here().host_id.as_str(),
                crate::host::HostIdentity::here().boot_id.as_str()
            ],
            |r| {
                Ok(PendingCommand {
                    id: r.get(pending_col::ID)?,
                    thread_id: r.get(pending_col::THREAD_ID)?,
                    kind: r.get(pending_col::KIND)?,
                    payload: r.get(pending_col::PAYLOAD)?,
                })
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

/// Claims a pending command for carrying out; false when another claim or a withdrawal came
/// first.
pub fn claim(conn: &Conn, id: i64) -> Result<bool> {
    Ok(conn.execute(q!("command_claim"), params![id])? > 0)
}

/// Records how a claimed (or at-once) command ended: `Done` or `Failed`, with its result.
pub fn finish(conn: &Conn, id: i64, state: CommandState, result: &str) -> Result<()> {
    conn.execute(q!("command_done"), params![id, state, result, now_iso()])?;
    Ok(())
}

columns! {
    /// Where a command stands (`{command_status_row}` in `sql/command_state.sql`, which reads
    /// `commands`): what [`CommandStatus`] holds.
    pub mod status_col as "{command_status_row}" {
        STATE = "state",
        RESULT = "result",
    }
}

/// Where a command stands: its state and, once done or failed, its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandStatus {
    pub state: CommandState,
    pub result: Option<String>,
}

/// A command's state, by id.
pub fn state(conn: &Conn, id: i64) -> Result<CommandStatus> {
    conn.one(q!("command_state", status_col), params![id], |r| {
        Ok(CommandStatus {
            state: r.get(status_col::STATE)?,
            result: r.get(status_col::RESULT)?,
        })
    })
}

/// Withdraws a command nobody has claimed yet, with `why` as its result; false when it was
/// claimed meanwhile (it is then the owner's to finish).
pub fn withdraw(conn: &Conn, id: i64, why: &str) -> Result<bool> {
    Ok(conn.execute(q!("command_withdraw"), params![id, why, now_iso()])? > 0)
}

/// Fails a claimed command whose owner died before finishing it.
pub fn abandon(conn: &Conn, id: i64, why: &str) -> Result<()> {
    conn.execute(q!("command_abandon"), params![id, why, now_iso()])?;
    Ok(())
}

columns! {
    /// A live thread `threadbase stop` may stop (`{stop_candidate_row}` in
    /// `sql/stop_candidates.sql`, which reads `threads t JOIN managers m`; a queued thread never
    /// launched is held by its manager's serve): what [`StopCandidate`] holds.
    pub mod stop_candidate_col as "{stop_candidate_row}" {
        ID = "t.id",
        PATH = "t.path",
        SESSION_ID = "m.session_id",
        OWNER_PID = "CASE WHEN t.queued_at IS NOT NULL AND t.launch_seq = 0 THEN m.owner_pid ELSE t.owner_pid END AS owner_pid",
        OWNER_STARTED_AT = "CASE WHEN t.queued_at IS NOT NULL AND t.launch_seq = 0 THEN m.owner_started_at ELSE t.owner_started_at END AS owner_started_at",
        OWNER_HOST = "CASE WHEN t.queued_at IS NOT NULL AND t.launch_seq = 0 THEN m.host_id ELSE t.host_id END AS host_id",
        OWNER_BOOT = "CASE WHEN t.queued_at IS NOT NULL AND t.launch_seq = 0 THEN m.boot_id ELSE t.boot_id END AS boot_id",
    }
}

/// A live thread `threadbase stop` may stop, with the serve that holds it.
#[derive(Debug, Clone)]
pub struct StopCandidate {
    pub id: ThreadId,
    pub path: String,
    pub session: String,
    /// The holding serve, when recorded.
    pub owner: Option<crate::identity::Owner>,
    /// The host it runs on, when recorded.
    pub owner_host: Option<String>,
}

/// Every live thread (of the manager with session id `manager`, if given), in path order
/// (sql/stop_candidates.sql); the caller matches the paths against its globs.
pub fn stop_candidates(conn: &Conn, manager: Option<&str>) -> Result<Vec<StopCandidate>> {
    let rows = conn
        .all(
            q!("stop_candidates", stop_candidate_col),
            params![manager],
            |r| {
                let pid: Option<i64> = r.get(stop_candidate_col::OWNER_PID)?;
                let started: Option<i64> = r.get(stop_candidate_col::OWNER_STARTED_AT)?;
                let host: Option<String> = r.get(stop_candidate_col::OWNER_HOST)?;
                let boot: Option<String> = r.get(stop_candidate_col::OWNER_BOOT)?;
                Ok(StopCandidate {
                    id: r.get(stop_candidate_col::ID)?,
                    path: r.get(stop_candidate_col::PATH)?,
                    session: r.get(stop_candidate_col::SESSION_ID)?,
                    // A holder without a start time is no process the stop could wait for.
                    owner: started.and_then(|_| {
                        crate::identity::Owner::recorded(
                            pid,
                            started,
                            host.as_deref(),
                            boot.as_deref(),
                        )
                    }),
                    owner_host: host,
                })
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

columns! {
    /// How a stopped thread stands (`{stop_outcome_row}` in `sql/stop_outcome.sql`, which
    /// reads `threads`): its status and exit kind, read by [`stop_outcome`].
    pub mod stop_outcome_col as "{stop_outcome_row}" {
        STATUS = "status",
        EXIT_KIND = "exit_kind",
    }
}

/// Whether a thread `threadbase stop` asked to stop is still live, and its exit once closed;
/// `None` when the row is gone (sql/stop_outcome.sql).
pub fn stop_outcome(
    conn: &Conn,
    id: &ThreadId,
) -> Result<Option<(crate::domain::ThreadStatus, Option<crate::domain::ExitKind>)>> {
    conn.opt(q!("stop_outcome", stop_outcome_col), params![id], |r| {
        Ok((
            r.get(stop_outcome_col::STATUS)?,
            r.get(stop_outcome_col::EXIT_KIND)?,
        ))
    })
}
