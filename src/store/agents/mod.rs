//! Typed access to contract B's rows: its registry (`managers`), its columns of `threads`
//! (lifecycle state, status line, requests, owner), its `mailbox` rows ([`mailbox`]: steers
//! for children, notices for parents) and the `commands` row that stops a run another serve
//! holds.
//!
//! Each function runs one query of `sql/` through `prepare_cached` on the connection it is
//! given (a read connection, or the writer's transaction), so `engine::agent` holds no SQL and
//! reads no column by position.

pub mod mailbox;
pub mod reap;
pub mod recap;
pub mod timers;

use crate::domain::{ManagerId, SessionId};
use crate::store::Conn;
use rusqlite::{named_params, OptionalExtension, Row};

use crate::error::Result;

pub use crate::domain::AgentState;
use crate::domain::{ThreadId, ThreadStatus};

/// The serve that launched (and supervises) a thread's run: its pid and start time, the one
/// owner type of every contract ([`crate::process::ProcessIdentity`]).
pub use crate::process::ProcessIdentity;

// ---- managers: the registry ------------------------------------------------------------------

/// A registry's identity and, from the main conversation's serve only, its session file, cwd
/// and owner (a child agent's serve passes `None` and changes none of them).
pub struct Registry<'a> {
    pub session_id: &'a SessionId,
    pub session_file: Option<&'a str>,
    pub cwd: Option<&'a str>,
    pub owner: Option<ProcessIdentity>,
    pub now: &'a str,
}

/// Finds or creates the registry of a main session; returns its id.
pub fn upsert_registry(conn: &Conn, r: &Registry<'_>) -> Result<ManagerId> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_manager_upsert.sql"))?
        .query_row(
            named_params! {
                ":session_id": r.session_id, ":session_file": r.session_file, ":cwd": r.cwd,
                ":owner_pid": r.owner.map(|o| o.pid),
                ":owner_started_at": r.owner.map(|o| o.started_at), ":now": r.now,
            },
            |row| row.get("id"),
        )?)
}

/// The first reason a saved registry cannot be restored, if any.
pub fn registry_problem(conn: &Conn, registry: ManagerId) -> Result<Option<String>> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_registry_problem.sql"))?
        .query_row([registry], |r| r.get(0))
        .optional()?)
}

/// The main session's file, if the registry knows one.
pub fn registry_session_file(conn: &Conn, registry: ManagerId) -> Result<Option<String>> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_registry_session_file.sql"))?
        .query_row([registry], |r| r.get::<_, Option<String>>("session_file"))
        .optional()?
        .flatten())
}

// ---- threads: contract B's columns -----------------------------------------------------------

/// The columns an agent-row query selects, in this order (`sql/agent_thread*.sql`, all of
/// the view `agent_rows`: `sql/view_agent_rows.sql`); the tests below check every such query
/// against them. The last two are the keys the queries filter and sort by, not read.
#[cfg(test)]
const AGENT_COLUMNS: [&str; 30] = [
    "id",
    "path",
    "parent_path",
    "agent_state",
    "task",
    "status_text",
    "output",
    "error",
    "session_file",
    "created_at",
    "updated_at",
    "status",
    "owner_pid",
    "owner_started_at",
    "agent_pause_requested",
    "agent_stop_requested",
    "cwd",
    "launch_seq",
    "name",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "agent_model",
    "agent_thinking",
    "agent_tools",
    "agent_timeout_ms",
    "agent_timeout_at",
    "agent_reaped_at",
    "manager_id",
    "spawn_order",
];

/// One contract B thread row.
#[derive(Debug, Clone)]
pub struct AgentRow {
    pub id: ThreadId,
    pub path: String,
    pub parent_path: Option<String>,
    pub state: AgentState,
    pub task: String,
    pub status_text: String,
    pub output: Option<String>,
    pub error: Option<String>,
    pub session_file: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    /// Its process is live (`status`).
    pub live: bool,
    pub owner_pid: Option<i64>,
    pub owner_started_at: Option<i64>,
    pub pause_requested: bool,
    pub stop_requested: bool,
    pub cwd: String,
    pub launch_seq: i64,
    pub name: String,
    /// What the thread spent (`thread_usage`).
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
    /// The model the child was launched with (`provider/model-id`), when one was resolved.
    pub model: Option<String>,
    /// Its thinking level, when resolved.
    pub thinking: Option<String>,
    /// Its tool set (JSON), when filtered.
    pub tools: Option<String>,
    /// The armed report-only timeout: its length and deadline (epoch ms).
    pub timeout_ms: Option<i64>,
    pub timeout_at: Option<i64>,
    /// When `reap` forgot it.
    pub reaped_at: Option<String>,
}

impl AgentRow {
    /// Maps a row of an agent-row query by column name ([`AGENT_COLUMNS`]).
    fn from_row(r: &Row<'_>) -> rusqlite::Result<AgentRow> {
        Ok(AgentRow {
            id: r.get("id")?,
            path: r.get("path")?,
            parent_path: r.get("parent_path")?,
            state: r
                .get::<_, Option<AgentState>>("agent_state")?
                .ok_or_else(|| {
                    rusqlite::Error::InvalidColumnType(
                        3,
                        "agent_state".into(),
                        rusqlite::types::Type::Text,
                    )
                })?,
            task: r.get::<_, Option<String>>("task")?.unwrap_or_default(),
            status_text: r
                .get::<_, Option<String>>("status_text")?
                .unwrap_or_default(),
            output: r.get("output")?,
            error: r.get("error")?,
            session_file: r.get("session_file")?,
            created_at: r.get("created_at")?,
            updated_at: r.get("updated_at")?,
            live: r.get::<_, ThreadStatus>("status")? == ThreadStatus::Live,
            owner_pid: r.get("owner_pid")?,
            owner_started_at: r.get("owner_started_at")?,
            pause_requested: r.get::<_, i64>("agent_pause_requested")? != 0,
            stop_requested: r.get::<_, i64>("agent_stop_requested")? != 0,
            cwd: r.get("cwd")?,
            launch_seq: r.get("launch_seq")?,
            name: r.get("name")?,
            input_tokens: r.get::<_, Option<i64>>("input_tokens")?.unwrap_or(0),
            output_tokens: r.get::<_, Option<i64>>("output_tokens")?.unwrap_or(0),
            cost_usd: r.get::<_, Option<f64>>("cost_usd")?.unwrap_or(0.0),
            model: r.get("agent_model")?,
            thinking: r.get("agent_thinking")?,
            tools: r.get("agent_tools")?,
            timeout_ms: r.get("agent_timeout_ms")?,
            timeout_at: r.get("agent_timeout_at")?,
            reaped_at: r.get("agent_reaped_at")?,
        })
    }

    /// Working (starting or running): a run is under way.
    pub fn active(&self) -> bool {
        self.state.active()
    }

    /// The agent type: the first word of the session name (`<type> <path>`), which spawn
    /// writes from a validated type name (no spaces).
    pub fn kind(&self) -> &str {
        self.name
            .split_once(' ')
            .map_or(self.name.as_str(), |(kind, _)| kind)
    }
}

fn agent_rows(conn: &Conn, sql: &str, params: impl rusqlite::Params) -> Result<Vec<AgentRow>> {
    let mut stmt = conn.db().prepare_cached(sql)?;
    let rows = stmt.query_map(params, AgentRow::from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// One thread of a registry by path.
pub fn thread_at_path(conn: &Conn, registry: ManagerId, path: &str) -> Result<Option<AgentRow>> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_thread_at_path.sql"))?
        .query_row((registry, path), AgentRow::from_row)
        .optional()?)
}

/// One thread by id.
pub fn thread_by_id(conn: &Conn, id: &ThreadId) -> Result<Option<AgentRow>> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_thread_by_id.sql"))?
        .query_row([id], AgentRow::from_row)
        .optional()?)
}

/// Every thread of a registry, in spawn order.
pub fn threads_all(conn: &Conn, registry: ManagerId) -> Result<Vec<AgentRow>> {
    agent_rows(
        conn,
        include_str!("../../../sql/agent_threads_all.sql"),
        [registry],
    )
}

/// The thread at `path` and its descendants (`lo`/`hi`: the descendant range of its sort
/// key), in spawn order.
pub fn threads_under(
    conn: &Conn,
    registry: ManagerId,
    path: &str,
    lo: &str,
    hi: &str,
) -> Result<Vec<AgentRow>> {
    agent_rows(
        conn,
        include_str!("../../../sql/agent_threads_under.sql"),
        (registry, path, lo, hi),
    )
}

/// How many threads a registry retains, completed ones included.
pub fn count_all(conn: &Conn, registry: ManagerId) -> Result<i64> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_count_all.sql"))?
        .query_row([registry], |r| r.get(0))?)
}

/// How many threads of a registry are working.
pub fn count_active(conn: &Conn, registry: ManagerId) -> Result<i64> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_count_active.sql"))?
        .query_row([registry], |r| r.get(0))?)
}

/// How many threads in a descendant range (`lo`/`hi`) are working.
pub fn count_active_under(conn: &Conn, registry: ManagerId, lo: &str, hi: &str) -> Result<i64> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_count_active_under.sql"))?
        .query_row((registry, lo, hi), |r| r.get(0))?)
}

/// The highest stopped (or stopping) thread among `path` and its ancestors.
pub fn stopped_ancestor(conn: &Conn, registry: ManagerId, path: &str) -> Result<Option<String>> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_stopped_ancestor.sql"))?
        .query_row(named_params! {":path": path, ":manager": registry}, |r| {
            r.get(0)
        })
        .optional()?)
}

/// A thread's new lifecycle fields (status, owner) and when they changed.
pub struct Lifecycle<'a> {
    pub id: &'a ThreadId,
    pub status: &'a str,
    pub owner: ProcessIdentity,
    pub at: &'a str,
}

/// Fills in a freshly reserved thread's status and owner.
pub fn set_new(conn: &Conn, t: &Lifecycle<'_>) -> Result<()> {
    conn.db()
        .prepare_cached(include_str!("../../../sql/agent_set_new.sql"))?
        .execute(named_params! {
            ":status": t.status, ":owner_pid": t.owner.pid,
            ":owner_started": t.owner.started_at, ":at": t.at, ":id": t.id,
        })?;
    Ok(())
}

/// Reserves the next run of a settled thread for `owner` (exactly one of concurrent resumers
/// changes the row).
pub fn reserve_resume(conn: &Conn, t: &Lifecycle<'_>) -> Result<()> {
    conn.db()
        .prepare_cached(include_str!("../../../sql/agent_reserve_resume.sql"))?
        .execute(named_params! {
            ":status": t.status, ":owner_pid": t.owner.pid,
            ":owner_started": t.owner.started_at, ":at": t.at, ":id": t.id,
        })?;
    Ok(())
}

/// Runs one of the updates that set a thread's status line (`:status`, `:at`, `:id`).
fn set_status_by(conn: &Conn, sql: &str, id: &ThreadId, status: &str, at: &str) -> Result<()> {
    conn.db()
        .prepare_cached(sql)?
        .execute(named_params! {":status": status, ":at": at, ":id": id})?;
    Ok(())
}

/// The prompt reached the child: starting → running.
pub fn mark_running(conn: &Conn, id: &ThreadId, status: &str, at: &str) -> Result<()> {
    set_status_by(
        conn,
        include_str!("../../../sql/agent_mark_running.sql"),
        id,
        status,
        at,
    )
}

/// A working thread's status line (agent_update).
pub fn set_status(conn: &Conn, id: &ThreadId, status: &str, at: &str) -> Result<()> {
    set_status_by(
        conn,
        include_str!("../../../sql/agent_set_status.sql"),
        id,
        status,
        at,
    )
}

/// A pause request on a working thread; `status` is its reason.
pub fn request_pause(conn: &Conn, id: &ThreadId, status: &str, at: &str) -> Result<()> {
    set_status_by(
        conn,
        include_str!("../../../sql/agent_request_pause.sql"),
        id,
        status,
        at,
    )
}

/// A stop request on a working thread.
pub fn request_stop(conn: &Conn, id: &ThreadId, status: &str, at: &str) -> Result<()> {
    set_status_by(
        conn,
        include_str!("../../../sql/agent_request_stop.sql"),
        id,
        status,
        at,
    )
}

/// A thread that is not working is stopped at once.
pub fn stop_settled(conn: &Conn, id: &ThreadId, status: &str, at: &str) -> Result<()> {
    set_status_by(
        conn,
        include_str!("../../../sql/agent_stop_settled.sql"),
        id,
        status,
        at,
    )
}

/// How a working thread settles.
pub struct Settlement<'a> {
    pub id: &'a ThreadId,
    pub state: AgentState,
    /// The new status line; `None` keeps the old one.
    pub status: Option<&'a str>,
    pub output: Option<&'a str>,
    pub error: Option<&'a str>,
    pub at: &'a str,
}

/// What a settled thread's notice is written from.
pub struct Settled {
    pub path: String,
    pub parent_path: Option<String>,
    pub status_text: Option<String>,
    pub launch_seq: i64,
    /// Its run was detached (no caller waited for it).
    pub detached: bool,
}

/// Settles a working thread; `None` when it was not working (someone settled it first).
pub fn settle(conn: &Conn, s: &Settlement<'_>) -> Result<Option<Settled>> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_settle.sql"))?
        .query_row(
            named_params! {
                ":state": s.state.as_str(), ":status": s.status, ":output": s.output,
                ":error": s.error, ":at": s.at, ":id": s.id,
            },
            |r| {
                Ok(Settled {
                    path: r.get("path")?,
                    parent_path: r.get("parent_path")?,
                    status_text: r.get("status_text")?,
                    launch_seq: r.get("launch_seq")?,
                    detached: r.get("agent_detached")?,
                })
            },
        )
        .optional()?)
}

/// A thread `agent_stop` stops.
pub struct StopTarget {
    pub id: ThreadId,
    pub path: String,
    /// Its process is live.
    pub live: bool,
    /// Working (starting or running).
    pub active: bool,
}

/// The thread at `path` in any state and its working descendants (`lo`/`hi`: their range),
/// deepest first.
pub fn stop_targets(
    conn: &Conn,
    registry: ManagerId,
    path: &str,
    lo: &str,
    hi: &str,
) -> Result<Vec<StopTarget>> {
    let mut stmt = conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_stop_targets.sql"))?;
    let rows = stmt.query_map((registry, path, lo, hi), |r| {
        Ok(StopTarget {
            id: r.get("id")?,
            path: r.get("path")?,
            live: r.get::<_, ThreadStatus>("status")? == ThreadStatus::Live,
            active: r
                .get::<_, Option<AgentState>>("agent_state")?
                .is_some_and(AgentState::active),
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// A thread whose process a serve holds.
pub struct OwnedThread {
    pub id: ThreadId,
    /// Working (starting or running).
    pub active: bool,
}

/// The threads of a registry whose live process `owner` holds.
pub fn owned_live(
    conn: &Conn,
    registry: ManagerId,
    owner: ProcessIdentity,
) -> Result<Vec<OwnedThread>> {
    let mut stmt = conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_owned_live.sql"))?;
    let rows = stmt.query_map((registry, owner.pid, owner.started_at), |r| {
        Ok(OwnedThread {
            id: r.get("id")?,
            active: r
                .get::<_, Option<AgentState>>("agent_state")?
                .is_some_and(AgentState::active),
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The working threads of a registry that `owner` launched.
pub fn owned_active(
    conn: &Conn,
    registry: ManagerId,
    owner: ProcessIdentity,
) -> Result<Vec<ThreadId>> {
    ids(
        conn,
        include_str!("../../../sql/agent_owned_active.sql"),
        registry,
        owner,
    )
}

/// Runs a query of thread ids by registry and owner.
fn ids(
    conn: &Conn,
    sql: &str,
    registry: ManagerId,
    owner: ProcessIdentity,
) -> Result<Vec<ThreadId>> {
    let mut stmt = conn.db().prepare_cached(sql)?;
    let rows = stmt.query_map((registry, owner.pid, owner.started_at), |r| r.get("id"))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// What a thread's runs are launched with (0.19): its model (`provider/id`), thinking level
/// and tool set (JSON), each `None` when not resolved.
pub struct RunChoice<'a> {
    pub model: Option<&'a str>,
    pub thinking: Option<&'a str>,
    pub tools: Option<&'a str>,
}

/// Records a thread's [`RunChoice`].
pub fn set_run(conn: &Conn, id: &ThreadId, c: &RunChoice<'_>) -> Result<()> {
    conn.db()
        .prepare_cached(include_str!("../../../sql/agent_set_run.sql"))?
        .execute(named_params! {
            ":model": c.model, ":thinking": c.thinking, ":tools": c.tools, ":id": id,
        })?;
    Ok(())
}

/// A thread's newest assistant message or error event: `(type, data)`.
pub struct LastOutcome {
    pub kind: String,
    pub data: String,
}

/// How a thread's last run ended, as its newest assistant message or error event says.
pub fn last_outcome(conn: &Conn, id: &ThreadId) -> Result<Option<LastOutcome>> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_last_outcome.sql"))?
        .query_row([id], |r| {
            Ok(LastOutcome {
                kind: r.get("type")?,
                data: r.get("data")?,
            })
        })
        .optional()?)
}

/// The text a thread's process ended with, if any.
pub fn exit_message(conn: &Conn, id: &ThreadId) -> Result<Option<String>> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_exit_message.sql"))?
        .query_row([id], |r| r.get::<_, Option<String>>("exit_message"))
        .optional()?
        .flatten())
}

#[cfg(test)]
mod tests {
    use super::AGENT_COLUMNS;

    /// Every agent-row query returns [`AGENT_COLUMNS`], in order, against the real schema.
    #[test]
    fn agent_row_queries_select_the_agent_columns() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path().join("t.sqlite")).unwrap();
        let conn = store.read().unwrap();
        for sql in [
            include_str!("../../../sql/agent_thread_at_path.sql"),
            include_str!("../../../sql/agent_thread_by_id.sql"),
            include_str!("../../../sql/agent_threads_all.sql"),
            include_str!("../../../sql/agent_threads_under.sql"),
        ] {
            let stmt = conn.db().prepare(sql).unwrap();
            assert_eq!(stmt.column_names(), AGENT_COLUMNS, "{sql}");
        }
    }
}
