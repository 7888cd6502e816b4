//! The engine: the operations behind the contracts, shared by them. It owns one manager's
//! scope (which session it serves, at which path and depth), validates nothing itself (the
//! contract modules do), and turns each operation into store transactions and runtime calls.

pub mod adopt;
pub mod agent;
pub mod answer;
pub mod budget;
mod cache;
mod caps;
mod child_env;
mod config;
mod isolation;
mod locks;
mod notices;
mod queue;
mod remote;
pub mod reply;
pub mod review;
pub mod spend;
mod thread;
mod worker;

pub use config::{env_integer, AgentLimits, Limits, ServeConfig, Settings};
pub use reply::Reply;
pub use thread::order::StartTurn;
pub use thread::{send_payload, set_archived, INTERRUPTED, STOPPED, STOP_ALREADY_CLOSED};
pub use worker::{restore_workers, snapshot_workers};

use crate::domain::{CommandKind, ManagerId, ThreadId};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::contract::projection::ThreadFacts;
use crate::error::Result;
use crate::runtime::Runtime;
use crate::store::threads::{upsert_manager, Contract, ManagerSpec};
use crate::store::Store;

/// The restore pass (see `runtime::restore`) with the contracts' texts: every live thread
/// whose owner is gone and is not `me` is closed as stale (contract B: paused).
pub fn restore_dead_owners(
    store: &Store,
    me: crate::runtime::signals::ProcessIdentity,
) -> Result<crate::runtime::restore::RestoreReport> {
    crate::runtime::restore::restore_dead_owners(store, me, &crate::contract::RESTORE_TEXTS)
}

/// Closes every live thread held on host `host_id` as stale (contract B: paused) without
/// signalling anything: `threadbase host forget`, for a host whose lease ran out.
pub fn forget_host(store: &Store, host_id: &str) -> Result<crate::runtime::restore::RestoreReport> {
    crate::runtime::restore::restore_host(store, host_id, &crate::contract::RESTORE_TEXTS)
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
    /// Contract B's registry, timers and known models.
    agent: agent::AgentState,
    /// This engine, for the tasks its verbs leave running (a run's supervision, a delivery).
    me: std::sync::Weak<Engine>,
    /// Answers this serve rendered, kept while the database does not change (`cache.rs`).
    cache: Arc<cache::Answers>,
    /// The notices running requests hold back (contract A's `wait`, contract B's reports).
    notice_holds: notices::NoticeHolds,
    /// The durable queue of the three contracts (`THREADBASE_QUEUE=1`, `queue.rs`).
    queue: queue::Queue,
    /// Contract A's starts in the order serve read them (`thread/order.rs`).
    start_order: Arc<thread::order::StartOrder>,
    /// What the cap watch did to this serve's children (`caps.rs`).
    caps: caps::CapsTold,
}

impl Engine {
    /// Registers (or takes over) the manager for `cfg` with this process as its owner.
    pub fn new(cfg: ServeConfig, store: Arc<Store>, rt: Runtime) -> Result<Arc<Engine>> {
        let owner = rt.owner();
        let session_file = cfg.session_file.as_ref().map(|p| p.display().to_string());
        let cwd = cfg.cwd.display().to_string();
        let (manager_id, registry) = store.write(|tx| {
            let manager = upsert_manager(
                tx,
                &ManagerSpec {
                    session_id: &cfg.session_id,
                    contract: Contract::Thread,
                    scope_path: &cfg.scope_path,
                    depth: cfg.depth,
                    self_thread_id: cfg.self_id.as_ref(),
                    session_file: session_file.as_deref(),
                    cwd: Some(&cwd),
                    owner_pid: Some(owner.pid),
                    owner_started_at: Some(owner.started_at),
                },
            )?;
            Ok((manager, agent::upsert_registry(tx, &cfg, owner)?))
        })?;
        let locks = Arc::new(locks::LockMap::default());
        let cache = Arc::new(cache::Answers::new(store.clone()));
        Ok(Arc::new_cyclic(|me| Engine {
            cfg,
            store,
            rt,
            manager_id,
            relaunch: tokio::sync::Mutex::new(()),
            locks,
            interrupting: worker::Interrupting::default(),
            agent: agent::AgentState::with_registry(registry),
            me: me.clone(),
            cache,
            notice_holds: notices::NoticeHolds::default(),
            queue: queue::Queue::default(),
            start_order: Arc::default(),
            caps: caps::CapsTold::default(),
        }))
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

    /// A request line just read (serve's read loop calls this before it runs the request): a
    /// contract A `start` takes its turn, so starts reserve their rows in the order their
    /// lines were read (`thread/order.rs`); `None` for anything else.
    pub fn arrive(&self, method: &str, params: &serde_json::Value) -> Option<StartTurn> {
        crate::contract::request::is_thread_start(method, params).then(|| self.start_order.arrive())
    }

    /// Runs one request: the one match, every verb of the three contracts to its own file.
    /// `turn` is the request's from [`Engine::arrive`] (`None`: a start reserves at once).
    pub async fn run(
        &self,
        req: crate::contract::Request,
        progress: &(dyn Fn(&crate::contract::thread::Details) + Send + Sync),
        turn: Option<StartTurn>,
    ) -> Result<Reply> {
        use crate::contract::agent::AgentRequest as B;
        use crate::contract::thread::ThreadRequest as A;
        use crate::contract::worker::WorkerRequest as C;
        use crate::contract::Request;
        match req {
            Request::Thread(A::Start(r)) => thread::start::start(self, r, turn).await,
            Request::Thread(A::List(r)) => thread::list::list(self, r),
            Request::Thread(A::Poll(r)) => thread::poll::poll(self, r).await,
            Request::Thread(A::Send(r)) => thread::send::send(self, r).await,
            Request::Thread(A::Stop(r)) => thread::stop::stop(self, r).await,
            Request::Thread(A::Wait(r)) => thread::wait::wait(self, r, progress).await,
            Request::Thread(A::Resume(r)) => thread::resume::resume(self, r).await,
            Request::Thread(A::Fork(r)) => thread::fork::fork(self, r).await,
            Request::Thread(A::Archive(r)) => thread::archive::archive(self, r),
            Request::Agent(B::Spawn(r)) => agent::spawn::spawn(self, r).await,
            Request::Agent(B::Wait(r)) => agent::wait::wait(self, r).await,
            Request::Agent(B::Steer(r)) => agent::steer::steer(self, r).await,
            Request::Agent(B::Status(r)) => agent::status::status(self, r),
            Request::Agent(B::Update(r)) => agent::update::update(self, r),
            Request::Agent(B::Pause(r)) => agent::pause::pause(self, r),
            Request::Agent(B::Stop(r)) => agent::stop::stop(self, r).await,
            Request::Agent(B::Output(r)) => agent::output::output(self, r),
            Request::Agent(B::Reap(r)) => agent::reap::reap(self, r).await,
            Request::Worker(C::Spawn(r)) => worker::spawn::spawn(self, r).await,
            Request::Worker(C::List) => worker::list::list(self),
            Request::Worker(C::Send(r)) => worker::send::send(self, r).await,
            Request::Worker(C::Interrupt(r)) => worker::interrupt::interrupt(self, r).await,
            Request::Worker(C::Hide(r)) => worker::hide::hide(self, r),
            Request::Worker(C::Report(r)) => worker::report::report(self, r),
            Request::Worker(C::Snapshot(r)) => worker::snapshot::snapshot(self, r),
            Request::Worker(C::Restore(r)) => worker::restore::restore(self, r),
            Request::SessionUsage(r) => spend::session_usage(self, r),
            Request::Answer(r) => answer::thread_answer(self, r),
            Request::ThreadStates(r) => thread::states::states(self, r),
        }
    }

    /// This engine as the `Arc` its owner holds, for tasks that outlive a request.
    fn arc(&self) -> Arc<Engine> {
        self.me
            .upgrade()
            .expect("an engine's tasks run only while its owner holds it")
    }

    /// A contract A `send` or `resume` another serve asked of a thread this serve holds (or
    /// manages), carried out here: the outcome text its `commands` row records.
    pub async fn carry_out(
        &self,
        kind: CommandKind,
        thread_id: &ThreadId,
        payload: Option<&str>,
    ) -> Result<String> {
        thread::carry_out(self, kind, thread_id, payload).await
    }

    /// The rows changed: with `THREADBASE_QUEUE=1`, the free slots of each contract's lane are
    /// claimed for its oldest queued threads and those are launched, on a task of their own
    /// (the row watcher calls this after every commit, and once as serve starts; `queue.rs`).
    pub fn queue_changed(self: &Arc<Self>) {
        queue::changed(self)
    }

    /// Serve is shutting down: the queue claims and launches nothing more ([`queue::Queue::close`]).
    pub async fn close_queue(&self) {
        self.queue.close().await
    }

    /// A stop of a thread still waiting in the queue: closed as stopped, never launched; false
    /// when it is not waiting.
    pub fn stop_queued(&self, thread_id: &ThreadId) -> Result<bool> {
        thread::stop_queued(self, thread_id)
    }

    /// The notices held back by running requests (the row watcher leaves them pending).
    pub fn notice_holds(&self) -> &notices::NoticeHolds {
        &self.notice_holds
    }

    /// Contract B's side of this engine (its row watcher's pass, timers and shutdown).
    pub(crate) fn agents(&self) -> agent::Agents<'_> {
        agent::Agents(self)
    }

    /// One pass of the caps on this serve's running children (`caps.rs`).
    pub async fn check_caps(self: &Arc<Self>) -> Result<()> {
        caps::check(self).await
    }

    /// The spend below this session not reported to it yet, now recorded as reported
    /// (`spend.rs`).
    pub fn tell_spend(&self) -> Result<crate::store::usage::Usage> {
        spend::tell(self)
    }

    /// Where this manager's references are resolved from.
    fn scope(&self) -> crate::store::refs::RefScope<'_> {
        crate::store::refs::RefScope {
            manager_id: self.manager_id,
            current_path: &self.cfg.scope_path,
            self_id: self.cfg.self_id.as_ref(),
        }
    }

    /// A thread's facts (`store/facts.rs`, one statement), with what an isolated thread changed in its
    /// worktree (`isolation::with_stat`: git asked now).
    fn facts(&self, id: &ThreadId) -> Result<ThreadFacts> {
        crate::store::facts::of_thread(&self.store.read()?, id).map(isolation::with_stat)
    }

    /// The environment of this manager's new child `id` at `path` and `depth`: its own
    /// `serve` is a contract A manager one level down.
    fn child_env(&self, id: &ThreadId, path: &str, depth: i64) -> Vec<(String, String)> {
        let parent = child_env::Parent::Thread {
            path: &self.cfg.scope_path,
            id: self.cfg.self_id.as_ref(),
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
