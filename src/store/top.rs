//! `threadbase top`'s reads: every thread, or one subtree as one index range per manager
//! (`paths::descendant_range`, as list's `ancestor` reads it, sql/top_threads_under.sql), so a
//! narrow view of a big database reads only its rows; and every thread's place in its tree.

use crate::store::Conn;
use std::collections::HashMap;

use rusqlite::named_params;

use crate::domain::{AgentState, Contract, ExitKind, Outcome, Phase, ThreadStatus};
use crate::error::Result;
use crate::paths::{descendant_range, sort_key};

/// One thread as top reads it (sql/top_threads.sql and sql/top_threads_under.sql).
#[derive(Debug, Clone)]
pub struct TopRow {
    pub id: String,
    pub session: String,
    pub contract: Contract,
    pub path: String,
    pub task_name: String,
    pub name: String,
    pub status: ThreadStatus,
    pub phase: Phase,
    pub agent_state: Option<AgentState>,
    pub exit_kind: Option<ExitKind>,
    pub archived: bool,
    pub hidden: bool,
    pub created_at: String,
    pub last_event_at: String,
    /// The holding serve (whether it is alive is the caller's question).
    pub owner_pid: Option<i64>,
    pub owner_started_at: Option<i64>,
    /// A contract C worker's run outcome and report verdict.
    pub outcome: Option<Outcome>,
    pub verdict: Option<String>,
    pub exit_code: Option<i64>,
    pub signalled: bool,
}

/// The thread at `subtree` and every thread below it, in every manager (every thread when it
/// is empty; a trailing `/` is ignored), in list order.
pub fn rows(conn: &Conn, subtree: &str) -> Result<Vec<TopRow>> {
    let sub = subtree.trim_end_matches('/');
    if sub.is_empty() {
        let mut stmt = conn
            .db()
            .prepare_cached(include_str!("../../sql/top_threads.sql"))?;
        let rows = stmt.query_map([], read_row)?;
        return Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?);
    }
    if sub.contains('!') {
        // No path holds `!` (threads' CHECK), the sort key's stand-in for `_`: this key
        // would name another path.
        return Ok(Vec::new());
    }
    let (lo, hi) = descendant_range(sub);
    let mut stmt = conn
        .db()
        .prepare_cached(include_str!("../../sql/top_threads_under.sql"))?;
    let rows = stmt.query_map(
        named_params! {":key": sort_key(sub), ":lo": lo, ":hi": hi},
        read_row,
    )?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// Every thread's root session and forest parent (sql/top_places.sql).
pub fn places(conn: &Conn) -> Result<HashMap<String, (String, Option<String>)>> {
    let mut stmt = conn
        .db()
        .prepare_cached(include_str!("../../sql/top_places.sql"))?;
    let places = stmt
        .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(places)
}

/// A row of sql/top_threads.sql or sql/top_threads_under.sql (the same columns).
fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TopRow> {
    Ok(TopRow {
        id: r.get(0)?,
        session: r.get(1)?,
        contract: r.get(2)?,
        path: r.get(3)?,
        task_name: r.get(5)?,
        name: r.get(6)?,
        status: r.get(7)?,
        phase: r.get(8)?,
        agent_state: r.get(9)?,
        exit_kind: r.get(10)?,
        archived: r.get(11)?,
        hidden: r.get::<_, Option<bool>>(12)?.unwrap_or(false),
        created_at: r.get(13)?,
        last_event_at: r.get(14)?,
        owner_pid: r.get(15)?,
        owner_started_at: r.get(16)?,
        outcome: r.get(17)?,
        verdict: r.get(18)?,
        exit_code: r.get(19)?,
        signalled: r.get(20)?,
    })
}
