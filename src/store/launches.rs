//! `threads` writes around a child's launch, the same for every contract: the session file its
//! process uses, and the close of a reserved row whose process never started.

use crate::store::db::{named, params, q};
use crate::store::Conn;

use crate::domain::{SessionId, ThreadId};
use crate::error::Result;
use crate::time::now_iso;

/// Records the session file (and session id) a thread's process uses.
pub fn set_session_file(
    conn: &Conn,
    id: &ThreadId,
    file: &str,
    session_id: &SessionId,
) -> Result<()> {
    conn.execute(
        q!("thread_set_session"),
        named! {
            ":file": file, ":session_id": session_id, ":at": now_iso(), ":id": id,
        },
    )?;
    Ok(())
}

/// Closes a reserved live thread with no process recorded as failed, with `message`; true
/// when it did (false: the runtime recorded a process, or the row is closed already).
pub fn close_unlaunched(conn: &Conn, id: &ThreadId, message: &str) -> Result<bool> {
    let closed = conn.execute(
        q!("thread_close_unlaunched"),
        params![id, message, now_iso()],
    )?;
    Ok(closed > 0)
}
