//! The engine: the operations behind the contracts, shared by them. It owns one manager's
//! scope (which session it serves, at which path and depth), validates nothing itself (the
//! contract modules do), and turns each operation into store transactions and runtime calls.

pub mod adopt;
pub mod agent;
pub mod budget;
mod cache;
mod child_env;
mod config;
mod facts;
mod locks;
mod notices;
mod remote;
pub mod spend;
mod thread;
mod worker;

pub use config::{env_integer, AgentLimits, Limits, ServeConfig, Settings};
pub use thread::{INTERRUPTED, STOPPED, STOP_ALREADY_CLOSED};
pub use worker::{restore_workers, snapshot_workers};

use crate::domain::{CommandKind, ManagerId};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use crate::contract::projection::{OutputFacts, ThreadFacts};
use crate::error::{Error, ErrorCode, Result};
use crate::runtime::Runtime;
use crate::serve::output::Reply;
use crate::store::events;
use crate::store::threads::{thread_by_id_any, upsert_manager, Contract, ManagerSpec};
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
pub fn output_facts(conn: &crate::store::Conn, id: &str) -> Result<OutputFacts> {
    crate::store::output::of_thread(conn, id)
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
    /// Still threads' rendered answers (`thread_snapshots`).
    cache: Arc<cache::SnapshotCache>,
    /// Contract A's notices a running `wait` holds back.
    notice_holds: notices::NoticeHolds,
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
            notice_holds: notices::NoticeHolds::default(),
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

    /// Contract A's notices held back by running waits (the row watcher leaves them pending).
    pub fn notice_holds(&self) -> &notices::NoticeHolds {
        &self.notice_holds
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
        let usage = crate::store::usage::of_thread(&conn, id)?.unwrap_or_default();
        Ok(ThreadFacts {
            row,
            out,
            events,
            usage,
        })
    }

    /// The environment of this manager's new child `id` at `path` and `depth`: its own
    /// `serve` is a contract A manager one level down.
    fn child_env(&self, id: &str, path: &str, depth: i64) -> Vec<(String, String)> {
        let parent = child_env::Parent::Thread {
            path: &self.cfg.scope_path,
            id: self.cfg.self_id.as_deref(),
        };
        child_env::ChildEnv::new(
            &self.cfg,
            Some(id),
            path,
            depth,
            parent,
            &self.cfg.root_session_id,
        )
        .thread_settings(&self.cfg.settings)
        .into_vec()
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
