//! Contract B (`agent_*`): the subagent lifecycle over the shared store and runtime.
//!
//! One registry (a `managers` row, contract `agent`) per main session holds every thread of
//! the tree, whichever `serve` launched it. The caller is this serve's scope path (`/root` for
//! the main conversation, the child's own path for a child's serve), never model input.
//!
//! A thread's *lifecycle* (`agent_state`: starting, running, completed, paused, stopped,
//! failed) is kept apart from its *process* (`status` live/closed): each run is one Pi process
//! launched with the task (or the steering message that resumes it) as its prompt, on the same
//! session file every time. The serve that launched a process supervises it: when the run
//! settles it records the new state and a notice for the parent in one transaction, then
//! retires the process once no descendant is still working (a child's own serve lives in its
//! process, and its working children with it).
//!
//! Everything that crosses processes is a row: steering for a thread another serve holds is a
//! `mailbox` row that serve delivers; notices are `mailbox` rows the recipient's serve claims;
//! a stop of another serve's thread is a `commands` row. A steer is consumed when it shows up
//! in the child's transcript, so a crash between sending and marking never delivers it twice.
//!
//! One file per verb (spawn, wait, steer, status, update, pause, stop, output, reap), plus the
//! run's supervision (`supervise.rs`), its model (`choose.rs`), steering delivery
//! (`delivery.rs`), the report-only timers (`timeout.rs`), the final recap (`recap.rs`) and the
//! notices and row watcher (`notices.rs`); this file holds [`Agents`], the borrowed view of the
//! engine these helpers are methods of, and the checks the verbs share. A queued spawn is
//! launched by the engine's queue (`engine/queue.rs`, through `spawn.rs` `launch_queued`). The
//! rows are read and written through `store::agents`.

mod choose;
mod delivery;
mod notices;
pub(super) mod output;
pub(super) mod pause;
pub(super) mod reap;
mod recap;
pub(super) mod spawn;
pub(super) mod status;
pub(super) mod steer;
pub(super) mod stop;
mod supervise;
mod timeout;
pub(super) mod update;
pub(super) mod wait;

use crate::domain::{ManagerId, ThreadId};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crate::store::Conn;

use crate::contract::agent::{self as contract, AgentFacts, AgentView};
use crate::engine::Engine;
use crate::engine::Reply;
use crate::error::{Error, ErrorCode, Result};
use crate::identity::{Holder, Owner, ProcessIdentity};
use crate::paths::{self, ROOT};
use crate::store::agents::{self, AgentRow};
use crate::time::now_iso;

/// How often waits re-read a thread's state (rows may change in another process).
const WAIT_POLL: Duration = Duration::from_millis(50);

/// A tool result (`{content, details}`) with `details` as its JSON, serialized at the edge.
fn answer(details: impl serde::Serialize + Send + 'static) -> Result<Reply> {
    Ok(Reply::shaped(move |w| {
        contract::tool_result(w, &details, false)
    }))
}

/// A tool result whose details are the view of `row`, shaped and serialized at the edge.
fn answer_row(row: AgentRow) -> Result<Reply> {
    Ok(Reply::shaped(move |w| {
        contract::tool_result(w, &view(&row), false)
    }))
}

/// What every tool answers about a thread.
fn view(row: &AgentRow) -> AgentView<'_> {
    contract::view(&AgentFacts {
        path: &row.path,
        parent: row.parent_path.as_deref(),
        kind: row.kind(),
        state: row.state,
        task: &row.task,
        status: &row.status_text,
        output: row.output.as_deref(),
        error: row.error.as_deref(),
        session_file: row.session_file.as_deref(),
        created_at: crate::time::ms_from_iso(&row.created_at).unwrap_or(0),
        updated_at: crate::time::ms_from_iso(&row.updated_at).unwrap_or(0),
        input_tokens: row.input_tokens,
        output_tokens: row.output_tokens,
        cost_usd: row.cost_usd,
        model: row.model.as_deref(),
        thinking_level: row.thinking.as_deref(),
        cost_id: row.id.as_str(),
    })
}

/// Contract B's side of a serve's [`Engine`], borrowed: the helpers its verbs share are this
/// view's methods, in the files of what they do (a run's launch and settlement in
/// `supervise.rs`, the model in `choose.rs`, steering in `delivery.rs`, …); the engine's own
/// fields and methods read through it.
#[derive(Clone, Copy)]
pub(crate) struct Agents<'e>(pub(crate) &'e Engine);

impl std::ops::Deref for Agents<'_> {
    type Target = Engine;

    fn deref(&self) -> &Engine {
        self.0
    }
}

/// Contract B's state in this serve's [`Engine`].
pub(crate) struct AgentState {
    /// This main session's registry, written when the serve started ([`upsert_registry`]).
    registry: ManagerId,
    /// The registry's rows were found restorable ([`Agents::registry`]).
    registry_checked: OnceLock<()>,
    /// The earliest report-only deadline among this serve's runs, as the row watcher last
    /// read it (`timeout.rs`).
    next_timer: Mutex<Option<i64>>,
    /// The models that have credentials (`pi --list-models`), asked once (`choose.rs`).
    available: OnceLock<Arc<Vec<crate::pi::models::KnownModel>>>,
}

impl AgentState {
    /// The state of a serve whose registry is `registry`.
    pub(crate) fn with_registry(registry: ManagerId) -> AgentState {
        AgentState {
            registry,
            registry_checked: OnceLock::new(),
            next_timer: Mutex::new(None),
            available: OnceLock::new(),
        }
    }

    /// The registry's id (not yet checked: [`Agents::registry`] checks it on first use).
    pub(crate) fn registry(&self) -> ManagerId {
        self.registry
    }
}

/// Finds or creates the registry of `cfg`'s main session, in the transaction that registers
/// the serve (`Engine::new`): a serve's reads never write it. Only the main conversation's
/// serve (scope `/root`) records its session file, cwd and itself (`owner`) as its owner.
pub(crate) fn upsert_registry(
    tx: &crate::store::Tx<'_>,
    cfg: &crate::engine::config::ServeConfig,
    owner: ProcessIdentity,
) -> Result<ManagerId> {
    let root = cfg.scope_path == ROOT;
    let session_file = cfg
        .session_file
        .as_ref()
        .filter(|_| root)
        .map(|p| p.display().to_string());
    let cwd = root.then(|| cfg.cwd.display().to_string());
    agents::upsert_registry(
        tx,
        &agents::Registry {
            session_id: &cfg.root_session_id,
            session_file: session_file.as_deref(),
            cwd: cwd.as_deref(),
            owner: root.then_some(owner),
            now: &now_iso(),
        },
    )
}

impl Agents<'_> {
    fn caller(&self) -> &str {
        &self.cfg.scope_path
    }

    fn caller_is_root(&self) -> bool {
        self.caller() == ROOT
    }

    /// This serve, as the owner of the runs it launches.
    fn run_owner(&self) -> ProcessIdentity {
        self.rt.owner()
    }

    /// The registry of this main session (written when the serve started,
    /// [`upsert_registry`]), checked on first use.
    fn registry(&self) -> Result<ManagerId> {
        let id = self.agent.registry();
        if self.agent.registry_checked.get().is_none() {
            self.check_registry(id)?;
            let _ = self.agent.registry_checked.set(());
        }
        Ok(id)
    }

    /// A saved registry that cannot be restored (a broken parent link, a `/root` entry, a
    /// thread without state) is refused as a whole.
    fn check_registry(&self, id: ManagerId) -> Result<()> {
        let conn = self.store.read()?;
        match agents::registry_problem(&conn, id)? {
            None => Ok(()),
            Some(p) => Err(Error::internal(format!(
                "The saved subagent registry of session {} cannot be restored: {p}. Nothing was changed. Repair: inspect it with `threadbase sql \"SELECT path, parent_path, agent_state FROM threads WHERE manager_id = {id}\"`, fix or delete the broken rows, then retry.",
                self.cfg.root_session_id
            ))),
        }
    }

    fn row_by_id(&self, id: &ThreadId) -> Result<AgentRow> {
        let conn = self.store.read()?;
        agents::thread_by_id(&conn, id)?
            .ok_or_else(|| Error::internal(format!("contract B thread {id} vanished")))
    }

    fn known(&self, registry: ManagerId, path: &str) -> Result<AgentRow> {
        let conn = self.store.read()?;
        match agents::thread_at_path(&conn, registry, path)? {
            Some(row) if row.reaped_at.is_none() => Ok(row),
            // Reaped: forgotten by the contract (its row stays for SQL and usage).
            Some(_) => Err(reaped_error(path)),
            None => Err(Error::new(
                ErrorCode::UnknownReference,
                format!(
                    "Unknown thread {path}. Repair: run agent_status to list the threads you can address, or agent_spawn it first."
                ),
            )),
        }
    }

    /// Who holds `row`'s run (the one rule, [`crate::identity::holder`]).
    fn run_holder(&self, row: &AgentRow) -> Holder {
        let recorded = crate::identity::Owner::recorded(
            row.owner_pid,
            row.owner_started_at,
            row.owner_host.as_deref(),
            row.owner_boot.as_deref(),
        );
        crate::identity::holder(recorded, self.rt.owner())
    }

    fn is_mine(&self, row: &AgentRow) -> bool {
        self.run_holder(row) == Holder::Here
    }

    fn owner_alive(&self, row: &AgentRow) -> bool {
        self.run_holder(row) != Holder::Gone
    }

    /// A thread claimed by a serve that died after this one started (so no restore pass saw
    /// it) is restored first: nobody would ever settle it or deliver to it. Working threads
    /// come back paused.
    fn restored_if_orphaned(&self, row: AgentRow) -> Result<AgentRow> {
        if (row.live || row.active()) && self.run_holder(&row) == Holder::Gone {
            crate::engine::restore_dead_owners(&self.store, self.rt.owner())?;
            return self.row_by_id(&row.id);
        }
        Ok(row)
    }

    /// The serve that holds a live process for `row`, when that is another living serve.
    fn holder_elsewhere(&self, row: &AgentRow) -> Option<Owner> {
        self.run_holder(row).elsewhere().filter(|_| row.live)
    }

    /// Contract B's access rule (`assertAccess`): `/root` may address every thread but
    /// itself, any other caller its strict descendants; reading may also target the caller.
    fn check_access(&self, target: &str, reading: bool) -> Result<()> {
        let caller = self.caller();
        if (caller == ROOT && target != ROOT)
            || (reading && target == caller)
            || paths::is_strictly_under(target, caller)
        {
            return Ok(());
        }
        let repair = if caller == ROOT {
            "name a thread under /root (e.g. \"/root/task\" or a relative name) or an independent root such as /k.".to_string()
        } else {
            format!("address a thread under {caller}, e.g. \"{caller}/task\" or a relative name.")
        };
        Err(Error::forbidden(format!(
            "{caller} may address only its descendants (not siblings, unrelated trees or ancestors). Repair: {repair}"
        )))
    }

    /// The caller's own row (a child's serve), which must exist.
    fn own_row(&self, registry: ManagerId) -> Result<AgentRow> {
        let conn = self.store.read()?;
        agents::thread_at_path(&conn, registry, self.caller())?.ok_or_else(|| {
            Error::new(
                ErrorCode::UnknownReference,
                format!(
                    "Unknown thread {}. Repair: run this tool from an agent spawned with agent_spawn in this session's registry.",
                    self.caller()
                ),
            )
        })
    }

    /// The caller's own row, which must be working (`agent_update`, `agent_pause`); `refusal`
    /// is the original's text for a caller that is not.
    fn working_self(&self, registry: ManagerId, refusal: &str) -> Result<AgentRow> {
        if self.caller_is_root() {
            // The original looks the caller up among the threads, where /root never is.
            return Err(Error::forbidden(
                "Unknown thread /root. Repair: agent_update and agent_pause are for spawned agents; the main conversation has no parent to report to.",
            ));
        }
        let me = self.own_row(registry)?;
        if !me.active() {
            return Err(Error::forbidden(format!(
                "{refusal}. Repair: {} is {}; call it while the agent runs.",
                me.path,
                me.state.as_str()
            )));
        }
        Ok(me)
    }

    /// Refuses `action` once the tree of `thread_id` (else of this session's registry) has
    /// reached a budget cap.
    fn check_agent_budget(
        &self,
        conn: &Conn,
        thread_id: Option<&ThreadId>,
        action: &str,
    ) -> Result<()> {
        let of = crate::store::usage::TreeOf {
            thread_id,
            self_id: self.cfg.self_id.as_ref(),
            session_id: &self.cfg.root_session_id,
        };
        self.cfg.budget.check(conn, of, action)
    }

    fn check_capacity(&self, conn: &Conn, registry: ManagerId) -> Result<()> {
        let active = agents::count_active(conn, registry)?;
        if active >= self.cfg.settings.agent_limits.max_concurrent {
            return Err(Error::new(
                ErrorCode::Limit,
                format!(
                    "Concurrent thread limit reached; wait for a thread to settle. Repair: {active} of {} threads are working; agent_wait on one of them first, or raise PI_SUBAGENTS_MAX_CONCURRENT.",
                    self.cfg.settings.agent_limits.max_concurrent
                ),
            ));
        }
        Ok(())
    }

    fn check_no_stopped_ancestor(
        &self,
        conn: &Conn,
        registry: ManagerId,
        path: &str,
    ) -> Result<()> {
        match agents::stopped_ancestor(conn, registry, path)? {
            None => Ok(()),
            Some(s) => Err(Error::conflict(format!(
                "Cannot continue under stopped ancestor {s}; resume it first. Repair: agent_steer {s} with a message, then retry."
            ))),
        }
    }

    /// How many threads under `path` are starting or running.
    fn working_descendants(&self, registry: ManagerId, path: &str) -> Result<i64> {
        let (lo, hi) = paths::descendant_range(path);
        let conn = self.store.read()?;
        agents::count_active_under(&conn, registry, &lo, &hi)
    }
}

/// A reaped thread, forgotten by the contract: unknown, and it cannot be resumed.
fn reaped_error(path: &str) -> Error {
    Error::new(
        ErrorCode::UnknownReference,
        format!(
            "Unknown thread {path}. Repair: {path} was reaped (forgotten; it cannot be resumed, and its row, usage and session file stay); spawn a new thread at another path."
        ),
    )
}
