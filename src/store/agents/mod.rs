//! Typed access to contract B's rows: its registry (`managers`), its columns of `threads`
//! (lifecycle state, status line, requests, owner), its `mailbox` rows ([`mailbox`]: steers
//! for children, notices for parents) and the `commands` row that stops a run another serve
//! holds.
//!
//! Each function runs one query of `sql/` through `prepare_cached` on the connection it is
//! given (a read connection, or the writer's transaction), so `engine::agent` holds no SQL and
//! reads no column. Each row a query returns is declared once (`columns!`, right above the
//! struct that holds it) and read by its declared positions.

use crate::store::db::{named, params, q, Params, Query, Row};
pub mod mailbox;
pub mod reap;
pub mod recap;
pub mod timers;

use crate::domain::{ManagerId, SessionId};
use crate::store::Conn;

use crate::error::Result;
use crate::store::rows::columns;

pub use crate::domain::AgentState;
use crate::domain::{ThreadId, ThreadStatus};

/// The serve that launched (and supervises) a thread's run: its pid and start time, the one
/// owner type of every contract ([`crate::identity::ProcessIdentity`]).
pub use crate::identity::ProcessIdentity;

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

columns! {
    /// What finding or creating a registry returns (`{agent_registry_upsert_row}` in the
    /// `RETURNING` of `sql/agent_manager_upsert.sql`, an upsert of `managers`): its id (read by
    /// [`upsert_registry`]) and session file.
    pub mod upsert_col as "{agent_registry_upsert_row}" {
        ID = "id",
        SESSION_FILE = "session_file",
    }
}

/// Finds or creates the registry of a main session; returns its id.
pub fn upsert_registry(conn: &Conn, r: &Registry<'_>) -> Result<ManagerId> {
    conn.one(
        q!("agent_manager_upsert", upsert_col),
        named! {
            ":session_id": r.session_id, ":session_file": r.session_file, ":cwd": r.cwd,
            ":owner_pid": r.owner.map(|o| o.pid),
            ":owner_started_at": r.owner.map(|o| o.started_at), ":now": r.now,
            ":host_id": r.owner.map(|_| crate::host::HostIdentity::here().host_id.as_str()),
            ":boot_id": r.owner.map(|_| crate::host::HostIdentity::here().boot_id.as_str()),
        },
        |row| row.get(upsert_col::ID),
    )
}

/// The first reason a saved registry cannot be restored, if any.
pub fn registry_problem(conn: &Conn, registry: ManagerId) -> Result<Option<String>> {
    conn.opt(q!("agent_registry_problem"), params![registry], |r| {
        r.get(0)
    })
}

/// The main session's file, if the registry knows one.
pub fn registry_session_file(conn: &Conn, registry: ManagerId) -> Result<Option<String>> {
    Ok(conn
        .opt(q!("agent_registry_session_file"), params![registry], |r| {
            r.get::<Option<String>>(0)
        })?
        .flatten())
}

// ---- threads: contract B's columns -----------------------------------------------------------

columns! {
    /// Contract B's thread row's columns, in order (`{agent_row}` in `sql/agent_thread*.sql`,
    /// which read `threads`), with what the thread spent (`thread_usage`, a primary-key
    /// lookup per row): what [`AgentRow`] holds, read by these positions.
    pub mod col as "{agent_row}" {
        ID = "id",
        PATH = "path",
        PARENT_PATH = "parent_path",
        AGENT_STATE = "agent_state",
        TASK = "task",
        STATUS_TEXT = "status_text",
        OUTPUT = "output",
        ERROR = "error",
        SESSION_FILE = "session_file",
        CREATED_AT = "created_at",
        UPDATED_AT = "updated_at",
        STATUS = "status",
        OWNER_PID = "owner_pid",
        OWNER_STARTED_AT = "owner_started_at",
        OWNER_HOST = "host_id",
        OWNER_BOOT = "boot_id",
        PAUSE_REQUESTED = "agent_pause_requested",
        STOP_REQUESTED = "agent_stop_requested",
        CWD = "cwd",
        LAUNCH_SEQ = "launch_seq",
        NAME = "name",
        INPUT_TOKENS = "(SELECT input_tokens FROM thread_usage WHERE thread_id = threads.id) AS input_tokens",
        OUTPUT_TOKENS = "(SELECT output_tokens FROM thread_usage WHERE thread_id = threads.id) AS output_tokens",
        COST_USD = "(SELECT cost_usd FROM thread_usage WHERE thread_id = threads.id) AS cost_usd",
        MODEL = "agent_model",
        THINKING = "agent_thinking",
        TOOLS = "agent_tools",
        TIMEOUT_MS = "agent_timeout_ms",
        TIMEOUT_AT = "agent_timeout_at",
        REAPED_AT = "agent_reaped_at",
    }
}

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
    pub owner_host: Option<String>,
    pub owner_boot: Option<String>,
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
    /// Maps a row of an agent-row query ([`col`]).
    fn from_row(r: &Row<'_>) -> Result<AgentRow> {
        Ok(AgentRow {
            id: r.get(col::ID)?,
            path: r.get(col::PATH)?,
            parent_path: r.get(col::PARENT_PATH)?,
            state: r
                .get::<Option<AgentState>>(col::AGENT_STATE)?
                .ok_or_else(|| {
                    rusqlite::Error::InvalidColumnType(
                        col::AGENT_STATE,
                        "agent_state".into(),
                        rusqlite::types::Type::Text,
                    )
                })?,
            task: r.get::<Option<String>>(col::TASK)?.unwrap_or_default(),
            status_text: r
                .get::<Option<String>>(col::STATUS_TEXT)?
                .unwrap_or_default(),
            output: r.get(col::OUTPUT)?,
            error: r.get(col::ERROR)?,
            session_file: r.get(col::SESSION_FILE)?,
            created_at: r.get(col::CREATED_AT)?,
            updated_at: r.get(col::UPDATED_AT)?,
            live: r.get::<ThreadStatus>(col::STATUS)? == ThreadStatus::Live,
            owner_pid: r.get(col::OWNER_PID)?,
            owner_started_at: r.get(col::OWNER_STARTED_AT)?,
            owner_host: r.get(col::OWNER_HOST)?,
            owner_boot: r.get(col::OWNER_BOOT)?,
            pause_requested: r.get::<i64>(col::PAUSE_REQUESTED)? != 0,
            stop_requested: r.get::<i64>(col::STOP_REQUESTED)? != 0,
            cwd: r.get(col::CWD)?,
            launch_seq: r.get(col::LAUNCH_SEQ)?,
            name: r.get(col::NAME)?,
            input_tokens: r.get::<Option<i64>>(col::INPUT_TOKENS)?.unwrap_or(0),
            output_tokens: r.get::<Option<i64>>(col::OUTPUT_TOKENS)?.unwrap_or(0),
            cost_usd: r.get::<Option<f64>>(col::COST_USD)?.unwrap_or(0.0),
            model: r.get(col::MODEL)?,
            thinking: r.get(col::THINKING)?,
            tools: r.get(col::TOOLS)?,
            timeout_ms: r.get(col::TIMEOUT_MS)?,
            timeout_at: r.get(col::TIMEOUT_AT)?,
            reaped_at: r.get(col::REAPED_AT)?,
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

fn agent_rows(conn: &Conn, sql: &Query, p: Params<'_>) -> Result<Vec<AgentRow>> {
    conn.all(sql, p, AgentRow::from_row)
}

/// One thread of a registry by path.
pub fn thread_at_path(conn: &Conn, registry: ManagerId, path: &str) -> Result<Option<AgentRow>> {
    conn.opt(
        q!("agent_thread_at_path", col),
        params![registry, path],
        AgentRow::from_row,
    )
}

/// One thread by id.
pub fn thread_by_id(conn: &Conn, id: &ThreadId) -> Result<Option<AgentRow>> {
    conn.opt(
        q!("agent_thread_by_id", col),
        params![id],
        AgentRow::from_row,
    )
}

/// Every thread of a registry, in spawn order.
pub fn threads_all(conn: &Conn, registry: ManagerId) -> Result<Vec<AgentRow>> {
    agent_rows(conn, q!("agent_threads_all", col), params![registry])
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
        q!("agent_threads_under", col),
        params![registry, path, lo, hi],
    )
}

/// How many threads a registry retains, completed ones included.
pub fn count_all(conn: &Conn, registry: ManagerId) -> Result<i64> {
    conn.one(q!("agent_count_all"), params![registry], |r| r.get(0))
}

/// How many threads of a registry are working.
pub fn count_active(conn: &Conn, registry: ManagerId) -> Result<i64> {
    conn.one(q!("agent_count_active"), params![registry], |r| r.get(0))
}

/// How many threads in a descendant range (`lo`/`hi`) are working.
pub fn count_active_under(conn: &Conn, registry: ManagerId, lo: &str, hi: &str) -> Result<i64> {
    conn.one(
        q!("agent_count_active_under"),
        params![registry, lo, hi],
        |r| r.get(0),
    )
}

/// The highest stopped (or stopping) thread among `path` and its ancestors.
pub fn stopped_ancestor(conn: &Conn, registry: ManagerId, path: &str) -> Result<Option<String>> {
    conn.opt(
        q!("agent_stopped_ancestor"),
        named! {":path": path, ":manager": registry},
        |r| r.get(0),
    )
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
    conn.execute(
        q!("agent_set_new"),
        named! {
            ":status": t.status, ":owner_pid": t.owner.pid,
            ":owner_started": t.owner.started_at, ":at": t.at, ":id": t.id,
            ":host_id": crate::host::HostIdentity::here().host_id.as_str(),
            ":boot_id": crate::host::HostIdentity::here().boot_id.as_str(),
        },
    )?;
    Ok(())
}

/// Reserves the next run of a settled thread for `owner` (exactly one of concurrent resumers
/// changes the row).
pub fn reserve_resume(conn: &Conn, t: &Lifecycle<'_>) -> Result<()> {
    conn.execute(
        q!("agent_reserve_resume"),
        named! {
            ":status": t.status, ":owner_pid": t.owner.pid,
            ":owner_started": t.owner.started_at, ":at": t.at, ":id": t.id,
            ":host_id": crate::host::HostIdentity::here().host_id.as_str(),
            ":boot_id": crate::host::HostIdentity::here().boot_id.as_str(),
        },
    )?;
    Ok(())
}

/// Runs one of the updates that set a thread's status line (`:status`, `:at`, `:id`).
fn set_status_by(conn: &Conn, sql: &Query, id: &ThreadId, status: &str, at: &str) -> Result<()> {
    conn.execute(sql, named! {":status": status, ":at": at, ":id": id})?;
    Ok(())
}

/// The prompt reached the child: starting → running.
pub fn mark_running(conn: &Conn, id: &ThreadId, status: &str, at: &str) -> Result<()> {
    set_status_by(conn, q!("agent_mark_running"), id, status, at)
}

/// A working thread's status line (agent_update).
pub fn set_status(conn: &Conn, id: &ThreadId, status: &str, at: &str) -> Result<()> {
    set_status_by(conn, q!("agent_set_status"), id, status, at)
}

/// A pause request on a working thread; `status` is its reason.
pub fn request_pause(conn: &Conn, id: &ThreadId, status: &str, at: &str) -> Result<()> {
    set_status_by(conn, q!("agent_request_pause"), id, status, at)
}

/// A stop request on a working thread.
pub fn request_stop(conn: &Conn, id: &ThreadId, status: &str, at: &str) -> Result<()> {
    set_status_by(conn, q!("agent_request_stop"), id, status, at)
}

/// A thread that is not working is stopped at once.
pub fn stop_settled(conn: &Conn, id: &ThreadId, status: &str, at: &str) -> Result<()> {
    set_status_by(conn, q!("agent_stop_settled"), id, status, at)
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

columns! {
    /// What a settle returns (`{agent_settled_row}` in the `RETURNING` of
    /// `sql/agent_settle.sql`, an update of `threads`): what [`Settled`] holds.
    pub mod settled_col as "{agent_settled_row}" {
        PATH = "path",
        PARENT_PATH = "parent_path",
        STATUS_TEXT = "status_text",
        LAUNCH_SEQ = "launch_seq",
        DETACHED = "agent_detached",
    }
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
    conn.opt(
        q!("agent_settle", settled_col),
        named! {
            ":state": s.state.as_str(), ":status": s.status, ":output": s.output,
            ":error": s.error, ":at": s.at, ":id": s.id,
        },
        |r| {
            Ok(Settled {
                path: r.get(settled_col::PATH)?,
                parent_path: r.get(settled_col::PARENT_PATH)?,
                status_text: r.get(settled_col::STATUS_TEXT)?,
                launch_seq: r.get(settled_col::LAUNCH_SEQ)?,
                detached: r.get(settled_col::DETACHED)?,
            })
        },
    )
}

columns! {
    /// A thread `agent_stop` stops (`{agent_stop_target_row}` in
    /// `sql/agent_stop_targets.sql`, which reads `threads`): what [`StopTarget`] holds.
    pub mod stop_target_col as "{agent_stop_target_row}" {
        ID = "id",
        PATH = "path",
        STATUS = "status",
        AGENT_STATE = "agent_state",
    }
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
    let rows = conn
        .all(
            q!("agent_stop_targets", stop_target_col),
            params![registry, path, lo, hi],
            |r| {
                Ok(StopTarget {
                    id: r.get(stop_target_col::ID)?,
                    path: r.get(stop_target_col::PATH)?,
                    live: r.get::<ThreadStatus>(stop_target_col::STATUS)? == ThreadStatus::Live,
                    active: r
                        .get::<Option<AgentState>>(stop_target_col::AGENT_STATE)?
                        .is_some_and(AgentState::active),
                })
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

columns! {
    /// A thread whose process a serve holds (`{agent_owned_row}` in
    /// `sql/agent_owned_live.sql`, which reads `threads`): what [`OwnedThread`] holds.
    pub mod owned_col as "{agent_owned_row}" {
        ID = "id",
        AGENT_STATE = "agent_state",
    }
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
    let rows = conn
        .all(
            q!("agent_owned_live", owned_col),
            params![
                registry,
                owner.pid,
                owner.started_at,
                crate::host::HostIdentity::here().host_id.as_str(),
                crate::host::HostIdentity::here().boot_id.as_str()
            ],
            |r| {
                Ok(OwnedThread {
                    id: r.get(owned_col::ID)?,
                    active: r
                        .get::<Option<AgentState>>(owned_col::AGENT_STATE)?
                        .is_some_and(AgentState::active),
                })
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

/// The working threads of a registry that `owner` launched.
pub fn owned_active(
    conn: &Conn,
    registry: ManagerId,
    owner: ProcessIdentity,
) -> Result<Vec<ThreadId>> {
    ids(conn, q!("agent_owned_active"), registry, owner)
}

/// Runs a query of thread ids by registry and owner.
fn ids(
    conn: &Conn,
    sql: &Query,
    registry: ManagerId,
    owner: ProcessIdentity,
) -> Result<Vec<ThreadId>> {
    let rows = conn
        .all(
            sql,
            params![
                registry,
                owner.pid,
                owner.started_at,
                crate::host::HostIdentity::here().host_id.as_str(),
                crate::host::HostIdentity::here().boot_id.as_str()
            ],
            |r| r.get(0),
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
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
    conn.execute(
        q!("agent_set_run"),
        named! {
            ":model": c.model, ":thinking": c.thinking, ":tools": c.tools, ":id": id,
        },
    )?;
    Ok(())
}

columns! {
    /// A thread's newest assistant message or error event (`{agent_last_outcome_row}` in
    /// `sql/agent_last_outcome.sql`, which reads `thread_events`): what [`LastOutcome`] holds.
    pub mod last_outcome_col as "{agent_last_outcome_row}" {
        KIND = "type",
        DATA = "data",
    }
}

/// A thread's newest assistant message or error event: `(type, data)`.
pub struct LastOutcome {
    pub kind: String,
    pub data: String,
}

/// How a thread's last run ended, as its newest assistant message or error event says.
pub fn last_outcome(conn: &Conn, id: &ThreadId) -> Result<Option<LastOutcome>> {
    conn.opt(
        q!("agent_last_outcome", last_outcome_col),
        params![id],
        |r| {
            Ok(LastOutcome {
                kind: r.get(last_outcome_col::KIND)?,
                data: r.get(last_outcome_col::DATA)?,
            })
        },
    )
}

/// The text a thread's process ended with, if any.
pub fn exit_message(conn: &Conn, id: &ThreadId) -> Result<Option<String>> {
    Ok(conn
        .opt(q!("agent_exit_message"), params![id], |r| {
            r.get::<Option<String>>(0)
        })?
        .flatten())
}
