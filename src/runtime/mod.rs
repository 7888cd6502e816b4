//! The runtime: supervises child Pi processes (`pi --mode rpc`) and records everything they
//! do as rows. It is thin on purpose: each child runs in its own process group with one task
//! per pipe and one waiting for its exit; events go through the batching [`ingest`] writer;
//! the runtime never holds the only copy of a fact.
//!
//! - [`signals`]: process-group signals and what is left of a group (the identity is [`crate::identity`]).
//! - [`rpc`]: the RPC codec and line framing.
//! - [`mapping`]: Pi events → lifecycle events and phases.
//! - [`ingest`]: the batching writer.
//! - [`restore`]: the crash-restore pass.
//! - `child`, `launch`, `stop`, `timers`: one live child (its pipes and what is said to it),
//!   starting it, ending it and recording its exit, and its idle and live deadlines; split so
//!   each part of a child's life reads on its own. Their public items are re-exported here.

pub mod ingest;
pub mod mapping;
pub mod models;
pub mod restore;
pub mod rpc;
pub mod signals;

mod child;
mod launch;
mod questions;
mod stalls;
mod stop;
mod timers;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::domain::ThreadId;
use crate::store::Store;
use child::Child;
use ingest::Ingest;
use signals::ProcessIdentity;

pub use child::{ChildView, SendMode, SendOutcome, PROMPT_GATE_WAIT, SEND_TIMEOUT};
pub use launch::{
    LaunchOutcome, LaunchReservation, LaunchSpec, StartKind, EXITED_EARLY_NOTE, PROMPT_ANSWER_WAIT,
};
pub use stop::{
    signal_name, ExitRecord, StopBy, STOP_ABORT_TIMEOUT, STOP_KILL_WAIT, STOP_TERM_WAIT,
};
pub use timers::RuntimeConfig;

/// How long a call for a thread whose launch is under way waits for its child to be spawned
/// (see [`Runtime::reserve_launch`]): a stop, a wait, a resume, a send.
pub const LAUNCH_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The target of the runtime's log lines and spans from every one of its files:
/// `threadbase::runtime`, as before the split (`THREADBASE_LOG` filters and log readers name it).
const LOG_TARGET: &str = module_path!();

struct Inner {
    store: Arc<Store>,
    ingest: Ingest,
    owner: ProcessIdentity,
    config: RuntimeConfig,
    children: Mutex<HashMap<ThreadId, Arc<Child>>>,
    /// Threads whose launch is under way (see [`Runtime::reserve_launch`]).
    launching: Mutex<HashSet<ThreadId>>,
    /// Bumped when a child is registered or a launch reservation ends.
    launches: watch::Sender<u64>,
    /// `THREADBASE_UI=parent`: how long a child's dialog waits for the parent's answer.
    ui_parent: std::sync::OnceLock<std::time::Duration>,
}

/// The supervisor of this process's children. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

impl Runtime {
    /// A runtime writing to `store`; must be created inside a tokio runtime.
    pub fn new(store: Arc<Store>, config: RuntimeConfig) -> Runtime {
        let ingest = Ingest::start(store.clone());
        Runtime {
            inner: Arc::new(Inner {
                store,
                ingest,
                owner: ProcessIdentity::current(),
                config,
                children: Mutex::new(HashMap::new()),
                launching: Mutex::default(),
                launches: watch::Sender::new(0),
                ui_parent: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Sends the dialogs of the children launched from now on to the parent, each waiting
    /// at most `timeout` for an answer (`THREADBASE_UI=parent`); set once, as serve starts.
    pub fn set_ui_parent(&self, timeout: std::time::Duration) {
        let _ = self.inner.ui_parent.set(timeout);
    }

    /// How long a child's dialog waits for the parent (`None`: it is cancelled at once).
    pub fn ui_parent(&self) -> Option<std::time::Duration> {
        self.inner.ui_parent.get().copied()
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.inner.store
    }

    /// The ordered writer shared with the children's events.
    pub fn ingest(&self) -> &Ingest {
        &self.inner.ingest
    }

    /// This process's identity, recorded as the owner of the children it launches.
    pub fn owner(&self) -> ProcessIdentity {
        self.inner.owner
    }

    fn child(&self, thread_id: &ThreadId) -> Option<Arc<Child>> {
        self.inner
            .children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(thread_id)
            .cloned()
    }

    /// True when this runtime holds a live process for the thread.
    pub fn is_live(&self, thread_id: &ThreadId) -> bool {
        self.child(thread_id)
            .is_some_and(|c| !c.view.borrow().closed)
    }

    /// The children this runtime holds.
    fn children(&self) -> Vec<Arc<Child>> {
        self.inner
            .children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Ids of the threads with a live process here.
    pub fn live_ids(&self) -> Vec<ThreadId> {
        self.inner
            .children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Watches a live child's phase and closure.
    pub fn watch(&self, thread_id: &ThreadId) -> Option<watch::Receiver<ChildView>> {
        self.child(thread_id).map(|c| c.view.subscribe())
    }

    /// Waits until everything recorded so far is committed.
    pub async fn flush(&self) {
        self.inner.ingest.flush().await
    }
}
