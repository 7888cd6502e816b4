//! The engine: the operations behind the contracts, shared by them. It owns one manager's
//! scope (which session it serves, at which path and depth), validates nothing itself (the
//! contract modules do), and turns each operation into store transactions and runtime calls.

pub mod agent;
pub mod budget;
mod cache;
mod listing;
mod locks;
mod remote;
mod thread;
mod worker;

pub use thread::{INTERRUPTED, STOPPED, STOP_ALREADY_CLOSED};
pub use worker::{max_workers, restore_workers, snapshot_workers};

use crate::domain::{CommandKind, ManagerId};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::contract::projection::{recent_event_count, Detail, OutputFacts, ThreadFacts};
use crate::error::{Error, ErrorCode, Result};
use crate::output::Reply;
use crate::runtime::{Runtime, RuntimeConfig};
use crate::store::events;
use crate::store::threads::{thread_by_id_any, upsert_manager, Contract, ManagerSpec, ThreadRow};
use crate::store::Store;

/// The restore pass (see `runtime::restore`) with the contracts' texts: every live thread
/// whose owner is gone and is not `me` is closed as stale (contract B: paused).
pub fn restore_dead_owners(
    store: &Store,
    me: crate::runtime::process::ProcessIdentity,
) -> Result<crate::runtime::restore::RestoreReport> {
    crate::runtime::restore::restore_dead_owners(store, me, &crate::contract::RESTORE_TEXTS)
}

/// A thread's retained output (`thread_output`); empty when none was recorded yet.
pub fn output_facts(conn: &rusqlite::Connection, id: &str) -> Result<OutputFacts> {
    crate::store::output::of_thread(conn, id)
}

/// The facts of `rows` (in their order) for a projection at `detail`, in two more queries
/// whatever their number: the retained output of all of them, and the retained events each
/// shows at that detail (only its last few: they are what the snapshot shows).
pub fn thread_facts(
    conn: &rusqlite::Connection,
    rows: Vec<ThreadRow>,
    detail: Detail,
) -> Result<Vec<ThreadFacts>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids = serde_json::to_string(&rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>())?;
    let outs = crate::store::output::of_threads(conn, &ids, rows.len())?;
    let events = events::rows_of_threads(conn, &ids, rows.len(), recent_event_count(detail))?;
    Ok(rows
        .into_iter()
        .zip(outs)
        .zip(events)
        .map(|((row, out), events)| ThreadFacts { row, out, events })
        .collect())
}

/// `PI_THREADS_MAX_DEPTH` and `PI_THREADS_MAX_THREADS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_depth: i64,
    pub max_threads: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 2,
            max_threads: 8,
        }
    }
}

/// Everything a `serve` knows about the session it manages.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The parent Pi session file, if it has one.
    pub session_file: Option<PathBuf>,
    /// The manager's identity: the parent session id.
    pub session_id: String,
    /// The parent's cwd.
    pub cwd: PathBuf,
    /// The caller's own thread path (`/root` for a top-level Pi).
    pub scope_path: String,
    /// The caller's depth (0 for a top-level Pi).
    pub depth: i64,
    /// The caller's own thread id when it is itself a managed child.
    pub self_id: Option<String>,
    /// The caller's parent path and id when it is a managed child.
    pub parent_path: Option<String>,
    pub parent_id: Option<String>,
    /// The root Pi session of the whole tree.
    pub root_session_id: String,
    /// The parent Pi's argv, for flag inheritance.
    pub parent_args: Vec<String>,
    /// The parent project is trusted: children inside its cwd get `--approve`.
    pub trusted: bool,
    /// The argv prefix that launches a child Pi.
    pub pi_command: Vec<String>,
    /// Pi's agent dir (sessions live below it when the parent has no session file).
    pub agent_dir: PathBuf,
    /// The database file (passed to children).
    pub db: PathBuf,
    pub limits: Limits,
    pub timers: RuntimeConfig,
    /// `THREADBASE_BUDGET_TOKENS` / `THREADBASE_BUDGET_USD`: caps on the root's whole tree.
    pub budget: budget::Budget,
}

/// Reads a non-negative integer setting: trimmed text matching `^\d+$` within the safe
/// integer range, else the default with one warning (the reference's text).
pub fn env_integer(
    name: &str,
    value: Option<&str>,
    default: u64,
    warn: &mut dyn FnMut(String),
) -> u64 {
    let Some(raw) = value else { return default };
    let t = raw.trim();
    let ok = !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    match t.parse::<u64>() {
        Ok(n) if ok && n <= 9_007_199_254_740_991 => n,
        _ => {
            warn(format!(
                "[pi-threads] Ignoring invalid {name}={} (expected a non-negative integer); using default.",
                crate::paths::json_quote(raw)
            ));
            default
        }
    }
}

impl ServeConfig {
    /// Limits and timers from the `PI_THREADS_*` environment.
    pub fn limits_from_env(
        get: &dyn Fn(&str) -> Option<String>,
        warn: &mut dyn FnMut(String),
    ) -> (Limits, RuntimeConfig) {
        let mut read =
            |name: &str, default: u64| env_integer(name, get(name).as_deref(), default, warn);
        let limits = Limits {
            max_depth: read("PI_THREADS_MAX_DEPTH", 2) as i64,
            max_threads: read("PI_THREADS_MAX_THREADS", 8) as i64,
        };
        let ms = |n: u64| (n > 0).then(|| Duration::from_millis(n));
        let timers = RuntimeConfig {
            idle_cleanup: ms(read("PI_THREADS_IDLE_CLEANUP_MS", 0)),
            live_timeout: ms(read("PI_THREADS_LIVE_TIMEOUT_MS", 0)),
        };
        (limits, timers)
    }
}

/// One manager's engine.
pub struct Engine {
    cfg: ServeConfig,
    store: Arc<Store>,
    rt: Runtime,
    manager_id: ManagerId,
    /// Serialises launches of existing threads (resume) so two concurrent resumes start one.
    relaunch: tokio::sync::Mutex<()>,
    /// Per-thread locks of launches and deliveries (contracts B and C).
    locks: Arc<locks::LockMap>,
    /// Contract C's workers whose run an interrupt is aborting.
    interrupting: worker::Interrupting,
    /// Contract B's side of this serve.
    agent: Arc<agent::AgentHost>,
    /// Closed threads' rendered answers.
    cache: Arc<cache::SnapshotCache>,
}

impl Engine {
    /// Registers (or takes over) the manager for `cfg` with this process as its owner.
    pub fn new(cfg: ServeConfig, store: Arc<Store>, rt: Runtime) -> Result<Engine> {
        let owner = rt.owner();
        let session_file = cfg.session_file.as_ref().map(|p| p.display().to_string());
        let cwd = cfg.cwd.display().to_string();
        let manager_id = store.write(|tx| {
            upsert_manager(
                tx,
                &ManagerSpec {
                    session_id: &cfg.session_id,
                    contract: Contract::Thread,
                    scope_path: &cfg.scope_path,
                    depth: cfg.depth,
                    self_thread_id: cfg.self_id.as_deref(),
                    session_file: session_file.as_deref(),
                    cwd: Some(&cwd),
                    owner_pid: Some(owner.pid),
                    owner_started_at: Some(owner.started_at),
                },
            )
        })?;
        let locks = Arc::new(locks::LockMap::default());
        let agent = agent::AgentHost::new(cfg.clone(), store.clone(), rt.clone(), locks.clone());
        let cache = cache::SnapshotCache::new(store.clone());
        Ok(Engine {
            cfg,
            store,
            rt,
            manager_id,
            relaunch: tokio::sync::Mutex::new(()),
            locks,
            interrupting: worker::Interrupting::default(),
            agent,
            cache,
        })
    }

    pub fn config(&self) -> &ServeConfig {
        &self.cfg
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    pub fn manager_id(&self) -> ManagerId {
        self.manager_id
    }

    /// The `thread` tool: validates, runs the action, returns `{content, details}`.
    pub async fn thread(
        &self,
        params: &Value,
        progress: &(dyn Fn(&crate::contract::thread::Details<'_>) + Send + Sync),
    ) -> Result<Reply> {
        let req = crate::contract::thread::parse(params)?;
        thread::run(self, req, progress).await
    }

    /// Contract C: one `threads_*` tool call (answered `{content: [{type: "text", text:
    /// <JSON>}], details: <result>}`) or `threads.snapshot` / `threads.restore` (answered with
    /// the bare `{workers}`). The caller is this serve's session id.
    pub async fn worker(&self, method: &str, params: &Value) -> Result<Reply> {
        let req = crate::contract::worker::parse(method, params)?;
        worker::run(self, method, req).await
    }

    /// Contract B: one `agent_*` tool call, answered `{content, details}` (plus `terminate:
    /// true` for `agent_pause`). The caller is this serve's scope path.
    pub async fn agent(&self, method: &str, params: &Value) -> Result<Reply> {
        self.agent.call(method, params).await.map(Reply::Json)
    }

    /// A contract A `send` or `resume` another serve asked of a thread this serve holds (or
    /// manages), carried out here: the outcome text its `commands` row records.
    pub async fn carry_out(
        &self,
        kind: CommandKind,
        thread_id: &str,
        payload: Option<&str>,
    ) -> Result<String> {
        thread::carry_out(self, kind, thread_id, payload).await
    }

    /// Contract B's side of this serve (its row watcher and shutdown hook).
    pub fn agent_host(&self) -> &Arc<agent::AgentHost> {
        &self.agent
    }

    /// A thread's row, retained output and events.
    fn facts(&self, id: &str) -> Result<ThreadFacts> {
        let conn = self.store.read()?;
        let row = thread_by_id_any(&conn, id)?.ok_or_else(|| {
            Error::new(
                ErrorCode::UnknownReference,
                format!("Unknown thread: {id} (it was removed meanwhile). Repair: list the threads and use a current id."),
            )
        })?;
        let out = output_facts(&conn, id)?;
        let events = events::rows_of_thread(&conn, id)?;
        Ok(ThreadFacts { row, out, events })
    }

    /// The environment a child's own `serve` reads its place from.
    fn child_env(&self, id: &str, path: &str, depth: i64) -> Vec<(String, String)> {
        let l = self.cfg.limits;
        let ms = |d: Option<Duration>| d.map_or(0, |d| d.as_millis() as u64).to_string();
        let mut env = vec![
            (
                "THREADBASE_DB".to_string(),
                self.cfg.db.display().to_string(),
            ),
            ("PI_THREADS_PATH".to_string(), path.to_string()),
            ("PI_THREADS_DEPTH".to_string(), depth.to_string()),
            ("PI_THREADS_SELF_ID".to_string(), id.to_string()),
            (
                "PI_THREADS_PARENT_PATH".to_string(),
                self.cfg.scope_path.clone(),
            ),
            (
                "PI_THREADS_ROOT_SESSION_ID".to_string(),
                self.cfg.root_session_id.clone(),
            ),
            ("PI_THREADS_MAX_DEPTH".to_string(), l.max_depth.to_string()),
            (
                "PI_THREADS_MAX_THREADS".to_string(),
                l.max_threads.to_string(),
            ),
            (
                "PI_THREADS_IDLE_CLEANUP_MS".to_string(),
                ms(self.cfg.timers.idle_cleanup),
            ),
            (
                "PI_THREADS_LIVE_TIMEOUT_MS".to_string(),
                ms(self.cfg.timers.live_timeout),
            ),
        ];
        if let Some(parent_id) = &self.cfg.self_id {
            env.push(("PI_THREADS_PARENT_ID".to_string(), parent_id.clone()));
            env.push(("PI_THREADS_PARENT_THREAD_ID".to_string(), parent_id.clone()));
        }
        env
    }

    /// Where a new child's session file goes: beside the parent's session file, else in Pi's
    /// session folder for the parent's cwd.
    fn child_session_dir(&self) -> PathBuf {
        match self.cfg.session_file.as_deref().and_then(Path::parent) {
            Some(dir) => dir.to_path_buf(),
            None => crate::pi::session::session_dir_for(&self.cfg.agent_dir, &self.cfg.cwd),
        }
    }
}
