//! The web view's reads (`threadbase web`, `serve/web/`): a page of one root session's tree
//! in tree order, read as a range of `thread_places_by_key` (sql/web_page.sql: the rows before
//! the page cost one index entry each, the page's rows one primary-key read each), the same
//! under a filter with each tree's count of matches (a filter on live threads reads the index of
//! live rows only), the subtree totals of a page's threads in
//! one statement, and an action's command row. A page costs three statements, whatever its
//! size and the tree's.

use crate::store::Conn;
use std::collections::HashMap;

use rusqlite::{params, OptionalExtension};

use crate::domain::{
    AgentState, CommandKind, CommandState, Contract, ExitKind, Phase, SessionId, ThreadId,
    ThreadStatus,
};
use crate::error::Result;

/// One thread of a page, as the web view shows it.
#[derive(Debug, Clone)]
pub struct WebRow {
    pub id: ThreadId,
    /// 1 at the top of the tree.
    pub level: i64,
    pub forest_parent_id: Option<String>,
    pub path: String,
    pub manager_session: String,
    pub contract: Contract,
    pub task_name: String,
    pub name: String,
    pub status: ThreadStatus,
    pub phase: Phase,
    pub agent_state: Option<AgentState>,
    pub exit_kind: Option<ExitKind>,
    pub exit_code: Option<i64>,
    pub signalled: bool,
    pub archived: bool,
    pub hidden: bool,
    pub created_at: String,
    pub last_event_at: String,
    pub owner_pid: Option<i64>,
    pub owner_started_at: Option<i64>,
    /// Every token the thread's messages used, and their cost.
    pub tokens: i64,
    pub cost_usd: f64,
}

/// Which threads a filtered page keeps. `state`, `visibility` and `contract` are the words
/// the SQL compares (`all` keeps everything); `glob` and `text` apply to the path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebFilter {
    pub state: &'static str,
    pub visibility: &'static str,
    pub contract: &'static str,
    pub glob: Option<String>,
    pub text: Option<String>,
}

impl WebFilter {
    /// Keeps every thread: the page is then an index range (sql/web_page.sql).
    pub fn is_none(&self) -> bool {
        [self.state, self.visibility, self.contract]
            .iter()
            .all(|w| *w == "all")
            && self.glob.is_none()
            && self.text.is_none()
    }
}

/// Rows `offset..offset+limit` of `root`'s tree, in tree order, kept by `filter`.
pub fn page(
    conn: &Conn,
    root: &SessionId,
    filter: &WebFilter,
    offset: i64,
    limit: i64,
) -> Result<Vec<WebRow>> {
    if filter.is_none() {
        let mut stmt = conn
            .db()
            .prepare_cached(include_str!("../../sql/web_page.sql"))?;
        let rows = stmt.query_map(params![root, offset, limit], read_row)?;
        return Ok(rows.collect::<rusqlite::Result<_>>()?);
    }
    // Live threads only: read from the index of live rows (few), not the tree's range.
    let sql = if filter.state == "live" {
        include_str!("../../sql/web_page_live.sql")
    } else {
        include_str!("../../sql/web_page_filtered.sql")
    };
    let mut stmt = conn.db().prepare_cached(sql)?;
    let rows = stmt.query_map(
        params![
            root,
            offset,
            limit,
            filter.state,
            filter.visibility,
            filter.contract,
            filter.glob,
            filter.text
        ],
        read_row,
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// How many threads of each root session's tree `filter` keeps (one pass over every place).
pub fn filtered_counts(conn: &Conn, filter: &WebFilter) -> Result<HashMap<String, i64>> {
    let sql = if filter.state == "live" {
        include_str!("../../sql/web_counts_live.sql")
    } else {
        include_str!("../../sql/web_counts_filtered.sql")
    };
    let mut stmt = conn.db().prepare_cached(sql)?;
    let rows = stmt.query_map(
        params![
            filter.state,
            filter.visibility,
            filter.contract,
            filter.glob,
            filter.text
        ],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A thread's subtree (itself and every descendant, across managers): threads, tokens, cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SubtreeTotals {
    pub threads: i64,
    pub tokens: i64,
    pub cost_usd: f64,
}

/// The subtree totals of `ids` (one statement), by id; an id without a place is missing.
pub fn subtree_totals(conn: &Conn, ids: &[ThreadId]) -> Result<HashMap<ThreadId, SubtreeTotals>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let ids = serde_json::to_string(ids)?;
    let mut stmt = conn
        .db()
        .prepare_cached(include_str!("../../sql/web_subtree_totals.sql"))?;
    let rows = stmt.query_map([ids], |r| {
        Ok((
            r.get::<_, ThreadId>(0)?,
            SubtreeTotals {
                threads: r.get(1)?,
                tokens: r.get::<_, Option<i64>>(2)?.unwrap_or(0),
                cost_usd: r.get::<_, Option<f64>>(3)?.unwrap_or(0.0),
            },
        ))
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A command row as the web view shows an action's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRow {
    pub id: i64,
    pub thread_id: String,
    pub kind: CommandKind,
    pub state: CommandState,
    pub result: Option<String>,
}

/// The command `id`, if it exists (sql/web_command.sql).
pub fn command(conn: &Conn, id: i64) -> Result<Option<CommandRow>> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/web_command.sql"))?
        .query_row([id], |r| {
            Ok(CommandRow {
                id: r.get(0)?,
                thread_id: r.get(1)?,
                kind: r.get(2)?,
                state: r.get(3)?,
                result: r.get(4)?,
            })
        })
        .optional()?)
}

/// A row of sql/web_page.sql or sql/web_page_filtered.sql (the same columns).
fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<WebRow> {
    Ok(WebRow {
        id: r.get(0)?,
        level: r.get(1)?,
        forest_parent_id: r.get(2)?,
        path: r.get(3)?,
        manager_session: r.get(4)?,
        contract: r.get(5)?,
        task_name: r.get(6)?,
        name: r.get(7)?,
        status: r.get(8)?,
        phase: r.get(9)?,
        agent_state: r.get(10)?,
        exit_kind: r.get(11)?,
        exit_code: r.get(12)?,
        signalled: r.get(13)?,
        archived: r.get(14)?,
        hidden: r.get::<_, Option<bool>>(15)?.unwrap_or(false),
        created_at: r.get(16)?,
        last_event_at: r.get(17)?,
        owner_pid: r.get(18)?,
        owner_started_at: r.get(19)?,
        tokens: r.get::<_, Option<i64>>(20)?.unwrap_or(0),
        cost_usd: r.get::<_, Option<f64>>(21)?.unwrap_or(0.0),
    })
}
