//! `threadbase top`'s reads: every thread, or one subtree as one index range per manager
//! (`paths::descendant_range`, as list's `ancestor` reads it, sql/top_threads_under.sql), so a
//! narrow view of a big database reads only its rows; and every thread's place in its tree.

use crate::store::db::{named, params, q, Row};
use crate::store::Conn;
use std::collections::HashMap;

use crate::domain::{AgentState, Contract, ExitKind, Outcome, Phase, ThreadStatus};
use crate::error::Result;
use crate::paths::{descendant_range, sort_key};

crate::store::rows::columns! {
    /// `threadbase top`'s thread row's columns, in order (`{top_row}` in
    /// `sql/top_threads.sql` and `sql/top_threads_under.sql`, which read `managers m CROSS JOIN
    /// threads t LEFT JOIN reports r`): what [`TopRow`] holds, read by these positions. A
    /// contract C worker's outcome (as `store::workers::col` computes it) and report verdict
    /// give its list status; the exit's code and whether a signal ended it make
    /// `closed/failed` (`domain::state_words`).
    pub mod col as "{top_row}" {
        ID = "t.id",
        SESSION = "m.session_id",
        CONTRACT = "m.contract",
        PATH = "t.path",
        TASK_NAME = "t.task_name",
        NAME = "t.name",
        STATUS = "t.status",
        PHASE = "t.phase",
        AGENT_STATE = "t.agent_state",
        EXIT_KIND = "t.exit_kind",
        ARCHIVED = "t.archived",
        HIDDEN = "t.hidden",
        CREATED_AT = "t.created_at",
        LAST_EVENT_AT = "t.last_event_at",
        OWNER_PID = "t.owner_pid",
        OWNER_STARTED_AT = "t.owner_started_at",
        OUTCOME = "CASE WHEN t.outcome IS NOT NULL THEN t.outcome WHEN t.status = 'closed' THEN CASE WHEN t.exit_kind = 'failed' THEN 'failed' ELSE 'interrupted' END END AS outcome",
        VERDICT = "r.verdict",
        EXIT_CODE = "t.exit_code",
        SIGNALLED = "t.exit_signal IS NOT NULL AS signalled",
    }
}

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
        return conn.all(q!("top_threads", col), params![], read_row);
    }
    if sub.contains('!') {
        // No path holds `!` (threads' CHECK), the sort key's stand-in for `_`: this key
        // would name another path.
        return Ok(Vec::new());
    }
    let (lo, hi) = descendant_range(sub);
    conn.all(
        q!("top_threads_under", col),
        named! {":key": sort_key(sub), ":lo": lo, ":hi": hi},
        read_row,
    )
}

crate::store::rows::columns! {
    /// A thread's root session and forest parent (`{top_place_row}` in `sql/top_places.sql`,
    /// which reads `thread_places`), read by [`places`].
    pub mod place_col as "{top_place_row}" {
        THREAD_ID = "thread_id",
        ROOT_SESSION = "root_session",
        FOREST_PARENT_ID = "forest_parent_id",
    }
}

/// Every thread's root session and forest parent (sql/top_places.sql).
pub fn places(conn: &Conn) -> Result<HashMap<String, (String, Option<String>)>> {
    let places = conn.all(q!("top_places", place_col), params![], |r| {
        Ok((
            r.get(place_col::THREAD_ID)?,
            (
                r.get(place_col::ROOT_SESSION)?,
                r.get(place_col::FOREST_PARENT_ID)?,
            ),
        ))
    })?;
    Ok(places.into_iter().collect())
}

/// A row of sql/top_threads.sql or sql/top_threads_under.sql ([`col`]).
fn read_row(r: &Row<'_>) -> Result<TopRow> {
    Ok(TopRow {
        id: r.get(col::ID)?,
        session: r.get(col::SESSION)?,
        contract: r.get(col::CONTRACT)?,
        path: r.get(col::PATH)?,
        task_name: r.get(col::TASK_NAME)?,
        name: r.get(col::NAME)?,
        status: r.get(col::STATUS)?,
        phase: r.get(col::PHASE)?,
        agent_state: r.get(col::AGENT_STATE)?,
        exit_kind: r.get(col::EXIT_KIND)?,
        archived: r.get(col::ARCHIVED)?,
        hidden: r.get::<Option<bool>>(col::HIDDEN)?.unwrap_or(false),
        created_at: r.get(col::CREATED_AT)?,
        last_event_at: r.get(col::LAST_EVENT_AT)?,
        owner_pid: r.get(col::OWNER_PID)?,
        owner_started_at: r.get(col::OWNER_STARTED_AT)?,
        outcome: r.get(col::OUTCOME)?,
        verdict: r.get(col::VERDICT)?,
        exit_code: r.get(col::EXIT_CODE)?,
        signalled: r.get(col::SIGNALLED)?,
    })
}
