//! Typed access to `commands`: actions one serve hands to the serve that holds a thread.

use rusqlite::Connection;

use crate::error::Result;
use crate::time::now_iso;

/// Whether a send to `thread_id` is still waiting to be carried out or being carried out.
pub fn send_under_way(conn: &Connection, thread_id: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached(include_str!("../../sql/command_send_under_way.sql"))?
        .query_row([thread_id], |r| r.get(0))?)
}

/// Writes a command for the serve that holds (or, for a resume, manages) `thread_id`;
/// returns its id.
pub fn insert(
    conn: &Connection,
    thread_id: &str,
    kind: &str,
    payload: Option<&str>,
) -> Result<i64> {
    Ok(conn
        .prepare_cached(include_str!("../../sql/command_insert.sql"))?
        .query_row((thread_id, kind, payload, now_iso()), |r| r.get(0))?)
}

/// Where a command stands: its state and, once done or failed, its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandState {
    pub state: String,
    pub result: Option<String>,
}

/// A command's state, by id.
pub fn state(conn: &Connection, id: i64) -> Result<CommandState> {
    Ok(conn
        .prepare_cached(include_str!("../../sql/command_state.sql"))?
        .query_row([id], |r| {
            Ok(CommandState {
                state: r.get(0)?,
                result: r.get(1)?,
            })
        })?)
}

/// Withdraws a command nobody has claimed yet, with `why` as its result; false when it was
/// claimed meanwhile (it is then the owner's to finish).
pub fn withdraw(conn: &Connection, id: i64, why: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached(include_str!("../../sql/command_withdraw.sql"))?
        .execute((id, why, now_iso()))?
        > 0)
}

/// Fails a claimed command whose owner died before finishing it.
pub fn abandon(conn: &Connection, id: i64, why: &str) -> Result<()> {
    conn.prepare_cached(include_str!("../../sql/command_abandon.sql"))?
        .execute((id, why, now_iso()))?;
    Ok(())
}
