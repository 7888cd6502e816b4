//! Typed access to `managers` and `threads`.

use crate::store::db::{named, params, q, wrong, Cell, Params, Query, Row};
use crate::store::Conn;
use serde::Serialize;

use crate::error::Result;
use crate::identity::ProcessIdentity;
use crate::time::now_iso;

use crate::domain::SessionId;
pub use crate::domain::{
    AgentState, Contract, Exit, ExitKind, ManagerId, Phase, ThreadId, ThreadState, ThreadStatus,
};

/// The identity and scope of a manager, and the process that owns it.
#[derive(Debug, Clone)]
pub struct ManagerSpec<'a> {
    pub session_id: &'a SessionId,
    pub contract: Contract,
    pub scope_path: &'a str,
    pub depth: i64,
    pub self_thread_id: Option<&'a ThreadId>,
    pub session_file: Option<&'a str>,
    pub cwd: Option<&'a str>,
    pub owner_pid: Option<i64>,
    pub owner_started_at: Option<i64>,
}

impl<'a> ManagerSpec<'a> {
    /// A manager of `session_id` for `contract` at `scope_path`, depth 0, with no self
    /// thread, session file, cwd or owner known: `..ManagerSpec::new(…)` fills in the rest.
    pub fn new(session_id: &'a SessionId, contract: Contract, scope_path: &'a str) -> Self {
        ManagerSpec {
            session_id,
            contract,
            scope_path,
            depth: 0,
            self_thread_id: None,
            session_file: None,
            cwd: None,
            owner_pid: None,
            owner_started_at: None,
        }
    }
}

/// Finds or creates a manager and records its current owner; returns its id.
pub fn upsert_manager(conn: &Conn, spec: &ManagerSpec<'_>) -> Result<ManagerId> {
    let id = conn.one(
        q!("manager_upsert"),
        named! {
            ":session_id": spec.session_id,
            ":contract": spec.contract.as_str(),
            ":scope_path": spec.scope_path,
            ":depth": spec.depth,
            ":self_thread_id": spec.self_thread_id,
            ":session_file": spec.session_file,
            ":cwd": spec.cwd,
            ":owner_pid": spec.owner_pid,
            ":owner_started_at": spec.owner_started_at,
            ":host_id": spec.owner_pid.map(|_| crate::host::HostIdentity::here().host_id.as_str()),
            ":boot_id": spec.owner_pid.map(|_| crate::host::HostIdentity::here().boot_id.as_str()),
            ":now": now_iso(),
        },
        |r| r.get(0),
    )?;
    Ok(id)
}

/// Records `owner` (this serve) as the holder of a thread it reserved, before its launch
/// (sql/thread_set_owner.sql).
pub fn set_owner(conn: &Conn, id: &ThreadId, owner: ProcessIdentity) -> Result<()> {
    conn.execute(
        q!("thread_set_owner"),
        named! {
            ":owner_pid": owner.pid, ":owner_started": owner.started_at,
            ":host_id": crate::host::HostIdentity::here().host_id.as_str(),
            ":boot_id": crate::host::HostIdentity::here().boot_id.as_str(),
            ":id": id,
        },
    )?;
    Ok(())
}

/// A manager's id by session and contract, if it exists.
pub fn manager_id(
    conn: &Conn,
    session_id: &SessionId,
    contract: Contract,
) -> Result<Option<ManagerId>> {
    let stmt = q!("manager_by_session");
    conn.opt(stmt, params![session_id, contract], |r| r.get(0))
}

/// What it takes to reserve a thread row.
#[derive(Debug, Clone, Default)]
pub struct NewThread {
    pub id: ThreadId,
    pub manager_id: ManagerId,
    pub path: String,
    pub parent_path: Option<String>,
    pub parent_id: Option<ThreadId>,
    pub task_name: String,
    pub name: String,
    pub depth: i64,
    pub cwd: String,
    pub args: Vec<String>,
    pub status: ThreadStatus,
    pub phase: Phase,
    pub agent_state: Option<AgentState>,
    pub session_file: Option<String>,
    pub session_id: Option<String>,
    pub prompt: Option<String>,
    pub task: Option<String>,
    pub coordinator_id: Option<String>,
    pub spawn_key: Option<String>,
    pub fingerprint: Option<String>,
    pub title: Option<String>,
    pub agent: Option<String>,
    /// Contract C: the model JSON its args name, its granted paths (JSON), and the message ids
    /// every retry of its spawn reuses.
    pub model: Option<String>,
    pub granted_paths: Option<String>,
    pub initial_message_id: Option<String>,
    pub report_message_id: Option<String>,
}

#[cfg(test)]
impl NewThread {
    /// A unit test's thread `/root/<id>` of manager `m` (cwd `/w`), in `status` and `phase`.
    pub(crate) fn under_root(
        id: &str,
        m: ManagerId,
        status: ThreadStatus,
        phase: Phase,
    ) -> NewThread {
        NewThread {
            id: ThreadId::new(id),
            manager_id: m,
            path: format!("/root/{id}"),
            parent_path: Some("/root".into()),
            task_name: id.into(),
            name: id.into(),
            depth: 1,
            cwd: "/w".into(),
            status,
            phase,
            ..Default::default()
        }
    }
}

/// Reserves a thread row (live, or closed with an exit set in the same transaction), for every
/// contract. A second thread at the same path of one manager is a `conflict`.
pub fn insert_thread(conn: &Conn, t: &NewThread) -> Result<()> {
    insert_thread_at(conn, t, &now_iso())
}

/// [`insert_thread`] created at `now` (a reservation that writes other rows at the same time).
pub fn insert_thread_at(conn: &Conn, t: &NewThread, now: &str) -> Result<()> {
    let args = serde_json::to_string(&t.args)?;
    conn.execute(
        q!("thread_insert"),
        named! {
            ":id": t.id,
            ":manager_id": t.manager_id,
            ":path": t.path,
            ":parent_path": t.parent_path,
            ":parent_id": t.parent_id,
            ":task_name": t.task_name,
            ":name": t.name,
            ":depth": t.depth,
            ":cwd": t.cwd,
            ":args": args,
            ":status": t.status,
            ":phase": t.phase,
            ":agent_state": t.agent_state,
            ":session_file": t.session_file,
            ":session_id": t.session_id,
            ":prompt": t.prompt,
            ":task": t.task,
            ":coordinator_id": t.coordinator_id,
            ":spawn_key": t.spawn_key,
            ":fingerprint": t.fingerprint,
            ":title": t.title,
            ":agent": t.agent,
            ":model": t.model,
            ":granted_paths": t.granted_paths,
            ":initial_message_id": t.initial_message_id,
            ":report_message_id": t.report_message_id,
            ":now": now,
        },
    )
    .map_err(|e| {
        if crate::store::is_unique_violation(&e) {
            let message = format!(
                "Thread path already exists: {}. Repair: choose a unique path for this parent.",
                t.path
            );
            return e
                .with_code(crate::error::ErrorCode::Conflict)
                .with_message(message);
        }
        e
    })?;
    Ok(())
}

crate::store::rows::columns! {
    /// The thread row's columns, in order (`{thread_row}` in a query of `sql/`, which reads
    /// `threads t`): what [`ThreadRow`] holds, read by these positions. Naming them instead of
    /// `t.*` keeps SQLite from copying out the rest of `threads` (prompt, output, …).
    pub mod col as "{thread_row}" {
        ID = "t.id",
        MANAGER_ID = "t.manager_id",
        PATH = "t.path",
        PARENT_PATH = "t.parent_path",
        PARENT_ID = "t.parent_id",
        TASK_NAME = "t.task_name",
        NAME = "t.name",
        DEPTH = "t.depth",
        CWD = "t.cwd",
        ARGS = "t.args",
        STATUS = "t.status",
        PHASE = "t.phase",
        AGENT_STATE = "t.agent_state",
        EXIT_KIND = "t.exit_kind",
        EXIT_CODE = "t.exit_code",
        EXIT_SIGNAL = "t.exit_signal",
        EXIT_MESSAGE = "t.exit_message",
        ARCHIVED = "t.archived",
        HIDDEN = "t.hidden",
        SESSION_FILE = "t.session_file",
        SESSION_ID = "t.session_id",
        PID = "t.pid",
        PGID = "t.pgid",
        OWNER_PID = "t.owner_pid",
        LAST_SEQ = "t.last_seq",
        CREATED_AT = "t.created_at",
        LAST_EVENT_AT = "t.last_event_at",
        OWNER_STARTED_AT = "t.owner_started_at",
    }
}

/// One `threads` row, as the engine reads it. (Its default, a live thread with nothing known,
/// is for tests to build rows from.)
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ThreadRow {
    pub id: ThreadId,
    pub manager_id: ManagerId,
    pub path: String,
    pub parent_path: Option<String>,
    pub parent_id: Option<ThreadId>,
    pub task_name: String,
    pub name: String,
    pub depth: i64,
    pub cwd: String,
    pub args: Vec<String>,
    /// Status, phase and exit, as one value.
    #[serde(flatten)]
    pub state: ThreadState,
    pub agent_state: Option<AgentState>,
    pub archived: bool,
    pub hidden: Option<bool>,
    pub session_file: Option<String>,
    pub session_id: Option<String>,
    pub pid: Option<i64>,
    pub pgid: Option<i64>,
    pub owner_pid: Option<i64>,
    pub last_seq: i64,
    pub created_at: String,
    pub last_event_at: String,
    /// The owning serve's start time (with `owner_pid`, its identity: a reused pid is not it).
    pub owner_started_at: Option<i64>,
}

impl ThreadRow {
    /// Maps a thread-row query's row by column position (see [`col`]).
    pub fn from_row(r: &Row<'_>) -> Result<Self> {
        // `args` is a JSON array, almost always empty: skip the parse (and the copy) then.
        let args = match r.cell(col::ARGS)? {
            Cell::Text("[]") => Vec::new(),
            Cell::Text(text) => serde_json::from_str(text).unwrap_or_default(),
            other => return Err(r.unreadable(col::ARGS, &wrong(other, "text (a JSON array)"))),
        };
        Ok(ThreadRow {
            id: r.get(col::ID)?,
            manager_id: r.get(col::MANAGER_ID)?,
            path: r.get(col::PATH)?,
            parent_path: r.get(col::PARENT_PATH)?,
            parent_id: r.get(col::PARENT_ID)?,
            task_name: r.get(col::TASK_NAME)?,
            name: r.get(col::NAME)?,
            depth: r.get(col::DEPTH)?,
            cwd: r.get(col::CWD)?,
            args,
            state: ThreadState::of_columns(
                r.get(col::STATUS)?,
                r.get(col::PHASE)?,
                r.get(col::EXIT_KIND)?,
                r.get(col::EXIT_CODE)?,
                r.get(col::EXIT_SIGNAL)?,
                r.get(col::EXIT_MESSAGE)?,
            )
            .ok_or_else(|| r.unreadable(col::EXIT_KIND, "an ended thread without its exit kind"))?,
            agent_state: r.get(col::AGENT_STATE)?,
            archived: r.get(col::ARCHIVED)?,
            hidden: r.get(col::HIDDEN)?,
            session_file: r.get(col::SESSION_FILE)?,
            session_id: r.get(col::SESSION_ID)?,
            pid: r.get(col::PID)?,
            pgid: r.get(col::PGID)?,
            owner_pid: r.get(col::OWNER_PID)?,
            last_seq: r.get(col::LAST_SEQ)?,
            created_at: r.get(col::CREATED_AT)?,
            last_event_at: r.get(col::LAST_EVENT_AT)?,
            owner_started_at: r.get(col::OWNER_STARTED_AT)?,
        })
    }

    pub fn is_live(&self) -> bool {
        matches!(self.state, ThreadState::Live { .. })
    }

    pub fn status(&self) -> ThreadStatus {
        self.state.status()
    }

    pub fn phase(&self) -> Phase {
        self.state.phase()
    }

    /// Its state in words (`crate::domain::state_words`), with what needs the user of it.
    pub fn state_words(&self, attention: Option<crate::domain::Attention>) -> String {
        let exit = self.exit();
        crate::domain::state_words(
            self.status(),
            self.phase(),
            exit.map(|x| x.kind),
            exit.and_then(|x| x.code),
            exit.is_some_and(|x| x.signal.is_some()),
            attention,
        )
    }

    /// How it ended, once closed.
    pub fn exit(&self) -> Option<&Exit> {
        self.state.exit()
    }

    /// Whether its rendered answers may be kept (the snapshot cache, migration V8): a closed
    /// thread, or a live one that is idle. Either changes only through its rows; a busy
    /// thread's rows change with every event, so keeping its answers would be wasted work.
    pub fn is_still(&self) -> bool {
        !self.is_live() || self.phase() == Phase::Idle
    }
}

/// Runs a query that returns thread rows (the columns of [`col`], in order; the store's tests
/// check every such query's columns).
pub fn query_threads(conn: &Conn, q: &Query, p: Params<'_>) -> Result<Vec<ThreadRow>> {
    conn.all(q, p, ThreadRow::from_row)
}

/// Runs a lookup that returns at most one thread row (a primary key or unique index
/// equality), stepping once.
pub fn query_thread(conn: &Conn, q: &Query, p: Params<'_>) -> Result<Option<ThreadRow>> {
    conn.opt(q, p, ThreadRow::from_row)
}

/// A thread by id in any manager.
pub fn thread_by_id_any(conn: &Conn, id: &ThreadId) -> Result<Option<ThreadRow>> {
    query_thread(conn, q!("thread_by_id_any", col), params![id])
}

crate::store::rows::columns! {
    /// The session id and contract of a thread's manager (`{thread_manager_row}` in
    /// `sql/manager_of_thread.sql`, which reads `managers m JOIN threads t`), read by
    /// [`manager_of_thread`].
    pub mod manager_col as "{thread_manager_row}" {
        SESSION_ID = "m.session_id",
        CONTRACT = "m.contract",
    }
}

/// The session id and contract of the manager a thread belongs to.
pub fn manager_of_thread(conn: &Conn, thread_id: &ThreadId) -> Result<Option<(SessionId, String)>> {
    let stmt = q!("manager_of_thread", manager_col);
    conn.opt(stmt, params![thread_id], |r| {
        Ok((
            r.get(manager_col::SESSION_ID)?,
            r.get(manager_col::CONTRACT)?,
        ))
    })
}

/// A thread's ancestors by parent link, the top first (across managers).
pub fn thread_ancestors(conn: &Conn, id: &ThreadId) -> Result<Vec<ThreadRow>> {
    query_threads(conn, q!("thread_ancestors", col), params![id])
}

/// How many live threads a manager has (PI_THREADS_MAX_THREADS holds per manager).
pub fn count_live(conn: &Conn, manager_id: ManagerId) -> Result<i64> {
    conn.one(q!("count_live"), params![manager_id], |r| r.get(0))
}

crate::store::rows::columns! {
    /// A live thread that sits idle (`{idle_thread_row}` in `sql/live_idle_threads.sql`, which
    /// reads `threads`): what [`IdleThread`] holds.
    pub mod idle_col as "{idle_thread_row}" {
        ID = "id",
        PATH = "path",
        SINCE = "last_event_at",
    }
}

/// A live thread that sits idle: its id, path and last event's time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdleThread {
    pub id: ThreadId,
    pub path: String,
    pub since: String,
}

/// Up to `limit` of `manager_id`'s live threads that sit idle, longest idle first.
pub fn live_idle(conn: &Conn, manager_id: ManagerId, limit: usize) -> Result<Vec<IdleThread>> {
    let rows = conn
        .all(
            q!("live_idle_threads", idle_col),
            params![manager_id, limit as i64],
            |r| {
                Ok(IdleThread {
                    id: ThreadId::new(r.get::<String>(idle_col::ID)?),
                    path: r.get(idle_col::PATH)?,
                    since: r.get(idle_col::SINCE)?,
                })
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

/// Whether a thread id is recorded.
pub fn thread_exists(conn: &Conn, id: &ThreadId) -> Result<bool> {
    conn.one(q!("thread_exists"), params![id], |r| r.get(0))
}

/// Whether a manager already holds `path`.
pub fn path_taken(conn: &Conn, manager_id: ManagerId, path: &str) -> Result<bool> {
    conn.one(q!("path_taken"), params![manager_id, path], |r| r.get(0))
}

/// The id of the thread at `path` of a manager.
pub fn thread_id_at_path(
    conn: &Conn,
    manager_id: ManagerId,
    path: &str,
) -> Result<Option<ThreadId>> {
    conn.opt(q!("thread_id_at_path"), params![manager_id, path], |r| {
        r.get(0)
    })
}

/// Archives or unarchives a closed thread.
pub fn set_archived(conn: &Conn, id: &ThreadId, archived: bool, at: &str) -> Result<()> {
    conn.execute(
        q!("thread_set_archived"),
        named! {":archived": archived, ":at": at, ":id": id},
    )?;
    Ok(())
}

crate::store::rows::columns! {
    /// A thread's status and the serve that holds it (`{thread_holder_row}` in
    /// `sql/thread_holder.sql`, which reads `threads t JOIN managers m`), read by
    /// [`thread_holder`].
    pub mod holder_col as "{thread_holder_row}" {
        STATUS = "t.status",
        OWNER_PID = "CASE WHEN t.owner_pid IS NOT NULL THEN t.owner_pid ELSE m.owner_pid END",
        OWNER_STARTED_AT = "CASE WHEN t.owner_pid IS NOT NULL THEN t.owner_started_at ELSE m.owner_started_at END",
        OWNER_HOST = "CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END",
        OWNER_BOOT = "CASE WHEN t.owner_pid IS NOT NULL THEN t.boot_id ELSE m.boot_id END",
    }
}

/// A thread's status and the serve that holds it (a reserved row whose launch is in flight:
/// its manager's serve), as recorded: `None` for a holder without a recorded pid.
pub fn thread_holder(
    conn: &Conn,
    id: &ThreadId,
) -> Result<Option<(ThreadStatus, Option<crate::identity::Owner>)>> {
    conn.opt(q!("thread_holder", holder_col), params![id], |r| {
        let owner = crate::identity::Owner::recorded(
            r.get(holder_col::OWNER_PID)?,
            r.get(holder_col::OWNER_STARTED_AT)?,
            r.get::<Option<String>>(holder_col::OWNER_HOST)?.as_deref(),
            r.get::<Option<String>>(holder_col::OWNER_BOOT)?.as_deref(),
        );
        Ok((r.get(holder_col::STATUS)?, owner))
    })
}

/// The host a thread's process last ran on (`None`: no such thread, or never launched).
pub fn thread_last_host(conn: &Conn, id: &ThreadId) -> Result<Option<String>> {
    Ok(conn
        .opt(q!("thread_last_host"), params![id], |r| {
            r.get::<Option<String>>(0)
        })?
        .flatten())
}

crate::store::rows::columns! {
    /// The serve that owns a manager (`{manager_owner_row}` in `sql/manager_owner.sql`, which
    /// reads `managers`), read by [`manager_owner`].
    pub mod owner_col as "{manager_owner_row}" {
        OWNER_PID = "owner_pid",
        OWNER_STARTED_AT = "owner_started_at",
        OWNER_HOST = "host_id",
        OWNER_BOOT = "boot_id",
    }
}

/// The serve that owns a manager, as recorded (`Some(None)`: a manager with no owner
/// recorded; `None`: no such manager).
pub fn manager_owner(
    conn: &Conn,
    manager_id: ManagerId,
) -> Result<Option<Option<crate::identity::Owner>>> {
    conn.opt(q!("manager_owner", owner_col), params![manager_id], |r| {
        Ok(crate::identity::Owner::recorded(
            r.get(owner_col::OWNER_PID)?,
            r.get(owner_col::OWNER_STARTED_AT)?,
            r.get::<Option<String>>(owner_col::OWNER_HOST)?.as_deref(),
            r.get::<Option<String>>(owner_col::OWNER_BOOT)?.as_deref(),
        ))
    })
}

/// The threads among `ids` that exist, in that order (sql/threads_by_ids.sql).
pub fn threads_by_ids(conn: &Conn, ids: &[ThreadId]) -> Result<Vec<ThreadRow>> {
    query_threads(
        conn,
        q!("threads_by_ids", col),
        params![serde_json::to_string(ids)?],
    )
}
