//! `threads` writes around a child's launch, the same for every contract: the session file its
//! process uses, and the close of a reserved row whose process never started.

use crate::store::Conn;
use rusqlite::named_params;

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
    conn.db()
        .prepare_cached(include_str!("../../sql/thread_set_session.sql"))?
        .execute(named_params! {
            ":file": file, ":session_id": session_id, ":at": now_iso(), ":id": id,
        })?;
    Ok(())
}

/// Closes a reserved live thread with no process recorded as failed, with `message`; true
/// when it did (false: the runtime recorded a process, or the row is closed already).
pub fn close_unlaunched(conn: &Conn, id: &ThreadId, message: &str) -> Result<bool> {
    let closed = conn
        .db()
        .prepare_cached(include_str!("../../sql/thread_close_unlaunched.sql"))?
        .execute((id, message, now_iso()))?;
    Ok(closed > 0)
}
