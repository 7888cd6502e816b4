//! Typed access to a thread process's life on its `threads` row, as the runtime writes it:
//! launched (a new launch sequence), its phases, a stop requested, closed with its exit.
//! Every write is keyed by the launch it belongs to where a late write of an older launch
//! could land (a close), so a relaunch is never closed by its predecessor's exit.

use crate::store::db::{named, params, q};
use crate::store::Conn;

use crate::domain::{ExitKind, Phase, ThreadId};
use crate::error::Result;

/// The process a launch started and the serve that holds it.
pub struct Launched {
    pub pid: i64,
    /// The process's start time (its identity with the pid), when it could be read.
    pub started: Option<i64>,
    pub owner_pid: i64,
    pub owner_started: i64,
    pub at: String,
    /// THREADBASE_STALL_MS of the launching serve (`None`: the default).
    pub stall_ms: Option<i64>,
}

/// Records a launch: the row is live and starting, its exit cleared, its launch sequence one
/// higher (returned); `None` when the row is gone.
pub fn launched(conn: &Conn, id: &ThreadId, l: &Launched) -> Result<Option<i64>> {
    conn.opt(
        q!("thread_launched"),
        named! {
            ":pid": l.pid, ":pgid": l.pid, ":started": l.started,
            ":owner_pid": l.owner_pid, ":owner_started": l.owner_started,
            ":host_id": crate::host::HostIdentity::here().host_id.as_str(),
            ":boot_id": crate::host::HostIdentity::here().boot_id.as_str(),
            ":now": l.at, ":id": id, ":stall_ms": l.stall_ms,
        },
        |r| r.get(0),
    )
}

/// A live thread's phase (a stopping thread keeps `stopping`); idle starts its idle stretch.
pub fn set_phase(conn: &Conn, id: &ThreadId, phase: Phase, at: &str) -> Result<()> {
    conn.execute(
        q!("thread_set_phase"),
        named! {":phase": phase, ":at": at, ":id": id},
    )?;
    Ok(())
}

/// A stop was asked for: the thread is `stopping` until its process ends.
pub fn request_stop(conn: &Conn, id: &ThreadId, at: &str) -> Result<()> {
    conn.execute(q!("thread_request_stop"), named! {":at": at, ":id": id})?;
    Ok(())
}

/// The thread's current launch sequence; `None` when the row is gone.
pub fn launch_seq(conn: &Conn, id: &ThreadId) -> Result<Option<i64>> {
    conn.opt(q!("thread_launch_seq"), params![id], |r| r.get(0))
}

/// A reserved row whose launch failed is live again for a moment, so [`close`] records the
/// failure as its exit.
pub fn reopen_for_failure(conn: &Conn, id: &ThreadId) -> Result<()> {
    conn.execute(q!("thread_reopen_for_failure"), params![id])?;
    Ok(())
}

/// Whether launch `launch_seq` of the thread is the live one.
pub fn is_live_launch(conn: &Conn, id: &ThreadId, launch_seq: i64) -> Result<bool> {
    Ok(conn
        .opt(q!("thread_is_live_launch"), params![id, launch_seq], |r| {
            r.get(0)
        })?
        .unwrap_or(false))
}

/// How a launch's process ended, as its row records it.
pub struct Exit<'a> {
    /// The phase the closed row keeps.
    pub phase: Phase,
    pub kind: ExitKind,
    pub code: Option<i64>,
    pub signal: Option<&'a str>,
    pub message: Option<&'a str>,
    /// Recorded without the process's own exit (a stop that outwaited it); a real exit of the
    /// same launch replaces it.
    pub synthetic: bool,
}

/// Closes launch `launch_seq`'s row with its exit; false when that launch is not the row's
/// (or it is closed for real already).
pub fn close(
    conn: &Conn,
    id: &ThreadId,
    launch_seq: i64,
    exit: &Exit<'_>,
    at: &str,
) -> Result<bool> {
    Ok(conn.execute(
        q!("thread_close"),
        named! {
            ":phase": exit.phase, ":kind": exit.kind, ":code": exit.code,
            ":signal": exit.signal, ":message": exit.message, ":synthetic": exit.synthetic,
            ":at": at, ":id": id, ":launch": launch_seq,
        },
    )? > 0)
}
