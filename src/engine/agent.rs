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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::{named_params, Connection, OptionalExtension, Row};
use serde_json::{json, Value};

use super::ServeConfig;
use crate::contract::agent::{self as contract, AgentFacts, AgentRequest, AgentState, AgentView};
use crate::contract::args as argpolicy;
use crate::error::{Error, ErrorCode, Result};
use crate::paths::{self, ROOT};
use crate::runtime::{LaunchSpec, Runtime, SendMode, StartKind};
use crate::store::threads::{insert_thread, NewThread};
use crate::store::Store;
use crate::time::now_iso;

/// Contract B's limits (settings: `PI_SUBAGENTS_MAX_LEVELS`, `PI_SUBAGENTS_MAX_THREADS`,
/// `PI_SUBAGENTS_MAX_CONCURRENT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentLimits {
    pub max_levels: usize,
    pub max_threads: i64,
    pub max_concurrent: i64,
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits {
            max_levels: 3,
            max_threads: 64,
            max_concurrent: 16,
        }
    }
}

impl AgentLimits {
    /// Reads the limits from the environment; invalid values warn and keep the default.
    pub fn from_env(get: &dyn Fn(&str) -> Option<String>, warn: &mut dyn FnMut(String)) -> Self {
        let d = AgentLimits::default();
        let mut read = |name: &str, default: u64| {
            super::env_integer(name, get(name).as_deref(), default, warn)
        };
        AgentLimits {
            max_levels: read("PI_SUBAGENTS_MAX_LEVELS", d.max_levels as u64).clamp(1, 32) as usize,
            max_threads: read("PI_SUBAGENTS_MAX_THREADS", d.max_threads as u64) as i64,
            max_concurrent: read("PI_SUBAGENTS_MAX_CONCURRENT", d.max_concurrent as u64) as i64,
        }
    }
}

/// How often waits re-read a thread's state (rows may change in another process).
const WAIT_POLL: Duration = Duration::from_millis(50);
/// How often a wait checks that the serve running its thread is still alive.
const OWNER_CHECK: Duration = Duration::from_secs(1);
/// How long `agent_stop` waits for each level of targets to settle.
const STOP_WAIT: Duration = Duration::from_secs(10);
/// How long a steer waits for another serve to pick up its row before answering.
const STEER_HANDOFF_WAIT: Duration = Duration::from_secs(3);
/// How long a resume waits for another serve to retire the thread's previous process (a
/// graceful stop of an idle Pi takes about 2 s).
const RETIREMENT_WAIT: Duration = Duration::from_secs(10);

/// One contract B thread row.
#[derive(Debug, Clone)]
struct AgentRow {
    id: String,
    path: String,
    parent_path: Option<String>,
    state: AgentState,
    task: String,
    status_text: String,
    output: Option<String>,
    error: Option<String>,
    session_file: Option<String>,
    created_at: String,
    updated_at: String,
    live: bool,
    owner_pid: Option<i64>,
    owner_started_at: Option<i64>,
    pause_requested: bool,
    stop_requested: bool,
    cwd: String,
    launch_seq: i64,
    name: String,
    /// What the thread spent (`thread_usage`).
    input_tokens: i64,
    output_tokens: i64,
    cost_usd: f64,
}

impl AgentRow {
    fn from_row(r: &Row<'_>) -> rusqlite::Result<AgentRow> {
        Ok(AgentRow {
            id: r.get(0)?,
            path: r.get(1)?,
            parent_path: r.get(2)?,
            state: r
                .get::<_, Option<String>>(3)?
                .as_deref()
                .and_then(AgentState::parse)
                .ok_or_else(|| {
                    rusqlite::Error::InvalidColumnType(
                        3,
                        "agent_state".into(),
                        rusqlite::types::Type::Text,
                    )
                })?,
            task: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
            status_text: r.get::<_, Option<String>>(5)?.unwrap_or_default(),
            output: r.get(6)?,
            error: r.get(7)?,
            session_file: r.get(8)?,
            created_at: r.get(9)?,
            updated_at: r.get(10)?,
            live: r.get::<_, String>(11)? == "live",
            owner_pid: r.get(12)?,
            owner_started_at: r.get(13)?,
            pause_requested: r.get::<_, i64>(14)? != 0,
            stop_requested: r.get::<_, i64>(15)? != 0,
            cwd: r.get(16)?,
            launch_seq: r.get(17)?,
            name: r.get(18)?,
            input_tokens: r.get::<_, Option<i64>>(19)?.unwrap_or(0),
            output_tokens: r.get::<_, Option<i64>>(20)?.unwrap_or(0),
            cost_usd: r.get::<_, Option<f64>>(21)?.unwrap_or(0.0),
        })
    }

    fn active(&self) -> bool {
        self.state.active()
    }

    /// The agent type: the first word of the session name (`<type> <path>`), which spawn
    /// writes from a validated type name (no spaces).
    fn kind(&self) -> &str {
        self.name
            .split_once(' ')
            .map_or(self.name.as_str(), |(kind, _)| kind)
    }

    fn view(&self) -> AgentView<'_> {
        contract::view(&AgentFacts {
            path: &self.path,
            parent: self.parent_path.as_deref(),
            kind: self.kind(),
            state: self.state,
            task: &self.task,
            status: &self.status_text,
            output: self.output.as_deref(),
            error: self.error.as_deref(),
            session_file: self.session_file.as_deref(),
            created_at: crate::time::ms_from_iso(&self.created_at).unwrap_or(0),
            updated_at: crate::time::ms_from_iso(&self.updated_at).unwrap_or(0),
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cost_usd: self.cost_usd,
        })
    }
}

/// A tool result (`{content, details}`) with `details` as its JSON.
fn answer(details: &impl serde::Serialize) -> Result<Vec<u8>> {
    contract::tool_result(details, false)
}

/// A thread `agent_stop` stops.
struct StopTarget {
    id: String,
    depth: usize,
    live: bool,
    /// Working (starting or running): its run is stopped; else it is marked stopped at once.
    active: bool,
}

/// A pending steering message.
struct Steer {
    id: i64,
    body: String,
    created_at: String,
    sent_to: Option<String>,
}

/// The contract B side of one serve. Shared with its background tasks.
pub struct AgentHost {
    cfg: ServeConfig,
    store: Arc<Store>,
    rt: Runtime,
    limits: AgentLimits,
    registry: OnceLock<i64>,
    /// Serialises the lifecycle work on one thread inside this serve.
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Threads whose settled view a request of this serve is about to return (a blocking
    /// spawn, a wait, a stop): their notices for the caller are held back meanwhile, and
    /// superseded once that result carries the same news ([`AgentHost::hold_notices`]).
    held: Mutex<HashMap<String, Held>>,
    /// Poked when held notices are released, so the row watcher delivers what is still due.
    released: tokio::sync::Notify,
}

/// One thread's hold: how many requests hold it, and the settlement notices this serve wrote
/// already marked delivered meanwhile (no other serve of the same caller may send them first).
#[derive(Default)]
struct Held {
    count: usize,
    quiet: Vec<i64>,
}

/// Holds back one thread's notices for the caller while a request that will report on it runs.
struct HeldNotices<'a> {
    host: &'a AgentHost,
    id: String,
}

impl Drop for HeldNotices<'_> {
    fn drop(&mut self) {
        let mut held = self.host.held.lock().unwrap_or_else(|p| p.into_inner());
        let mut reopen = Vec::new();
        if let Some(h) = held.get_mut(&self.id) {
            h.count -= 1;
            if h.count == 0 {
                reopen = std::mem::take(&mut h.quiet);
                held.remove(&self.id);
            }
        }
        drop(held);
        // The request ended without reporting the settlement it quieted (it read the row just
        // before the thread settled): the notice is due after all.
        if !reopen.is_empty() {
            if let Err(e) = self.host.reopen_notices(&reopen) {
                eprintln!("threadbase serve: a held notice could not be released: {e}");
            }
        }
        self.host.released.notify_one();
    }
}

impl AgentHost {
    pub fn new(cfg: ServeConfig, store: Arc<Store>, rt: Runtime) -> Arc<AgentHost> {
        let mut warn = |w: String| eprintln!("{w}");
        let limits = AgentLimits::from_env(
            &|k| std::env::var(k).ok().filter(|v| !v.is_empty()),
            &mut warn,
        );
        Arc::new(AgentHost {
            cfg,
            store,
            rt,
            limits,
            registry: OnceLock::new(),
            locks: Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
            released: tokio::sync::Notify::new(),
        })
    }

    /// Holds back `id`'s notices for this caller until the guard drops: the request will
    /// return the thread's view itself. Registered before the thread can settle, so the row
    /// watcher cannot deliver the settlement's notice first.
    fn hold_notices(&self, id: &str) -> HeldNotices<'_> {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id.to_string())
            .or_default()
            .count += 1;
        HeldNotices {
            host: self,
            id: id.to_string(),
        }
    }

    fn notices_held(&self, id: &str) -> bool {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(id)
    }

    /// Resolves when held notices were released (the row watcher then delivers what is due).
    pub(crate) async fn notices_released(&self) {
        self.released.notified().await
    }

    /// The caller got `id`'s settled view (or its failure) in a tool result: its pending
    /// notices for the caller (progress and settlement) say nothing new and are marked
    /// delivered without being sent. Called while they are held.
    fn supersede_notices(&self, id: &str) -> Result<()> {
        self.store.write(|tx| {
            tx.prepare_cached(include_str!("../../sql/agent_notices_supersede.sql"))?
                .execute(
                    named_params! {":at": now_iso(), ":id": id, ":recipient": self.caller()},
                )?;
            Ok(())
        })?;
        // The settlement this serve quieted while holding is now reported: it stays delivered.
        if let Some(h) = self
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(id)
        {
            h.quiet.clear();
        }
        Ok(())
    }

    /// Marks quieted settlement notices pending again (their request did not report them).
    fn reopen_notices(&self, ids: &[i64]) -> Result<()> {
        self.store.write(|tx| {
            let mut stmt = tx.prepare_cached(include_str!("../../sql/agent_notice_reopen.sql"))?;
            for id in ids {
                stmt.execute([id])?;
            }
            Ok(())
        })
    }

    /// `view` of a thread a request held notices for: supersedes them when it is settled.
    fn reported(&self, row: AgentRow) -> Result<Vec<u8>> {
        if !row.active() {
            self.supersede_notices(&row.id)?;
        }
        answer(&row.view())
    }

    fn caller(&self) -> &str {
        &self.cfg.scope_path
    }

    fn caller_is_root(&self) -> bool {
        self.caller() == ROOT
    }

    /// The registry of this main session, created on first use.
    fn registry(&self) -> Result<i64> {
        if let Some(id) = self.registry.get() {
            return Ok(*id);
        }
        let root = self.caller_is_root();
        let owner = self.rt.owner();
        let session_file = root
            .then(|| {
                self.cfg
                    .session_file
                    .as_ref()
                    .map(|p| p.display().to_string())
            })
            .flatten();
        let cwd = root.then(|| self.cfg.cwd.display().to_string());
        let id: i64 = self.store.write(|tx| {
            Ok(tx
                .prepare_cached(include_str!("../../sql/agent_manager_upsert.sql"))?
                .query_row(
                    named_params! {
                        ":session_id": self.cfg.root_session_id, ":session_file": session_file,
                        ":cwd": cwd, ":owner_pid": root.then_some(owner.pid),
                        ":owner_started_at": root.then_some(owner.started_at), ":now": now_iso(),
                    },
                    |r| r.get(0),
                )?)
        })?;
        self.check_registry(id)?;
        Ok(*self.registry.get_or_init(|| id))
    }

    /// A saved registry that cannot be restored (a broken parent link, a `/root` entry, a
    /// thread without state) is refused as a whole.
    fn check_registry(&self, id: i64) -> Result<()> {
        let conn = self.store.read()?;
        let problem: Option<String> = conn
            .prepare_cached(include_str!("../../sql/agent_registry_problem.sql"))?
            .query_row([id], |r| r.get(0))
            .optional()?;
        match problem {
            None => Ok(()),
            Some(p) => Err(Error::internal(format!(
                "The saved subagent registry of session {} cannot be restored: {p}. Nothing was changed. Repair: inspect it with `threadbase sql \"SELECT path, parent_path, agent_state FROM threads WHERE manager_id = {id}\"`, fix or delete the broken rows, then retry.",
                self.cfg.root_session_id
            ))),
        }
    }

    /// The registry's id when it exists (without creating it).
    fn existing_registry(&self, conn: &Connection) -> Result<Option<i64>> {
        if let Some(id) = self.registry.get() {
            return Ok(Some(*id));
        }
        crate::store::threads::manager_id(
            conn,
            &self.cfg.root_session_id,
            crate::store::threads::Contract::Agent,
        )
    }

    fn lock(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.locks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id.to_string())
            .or_default()
            .clone()
    }

    fn row_at(&self, conn: &Connection, registry: i64, path: &str) -> Result<Option<AgentRow>> {
        Ok(conn
            .prepare_cached(include_str!("../../sql/agent_thread_at_path.sql"))?
            .query_row((registry, path), AgentRow::from_row)
            .optional()?)
    }

    fn row_by_id(&self, id: &str) -> Result<AgentRow> {
        let conn = self.store.read()?;
        let row = conn
            .prepare_cached(include_str!("../../sql/agent_thread_by_id.sql"))?
            .query_row([id], AgentRow::from_row)
            .optional()?;
        row.ok_or_else(|| Error::internal(format!("contract B thread {id} vanished")))
    }

    fn known(&self, registry: i64, path: &str) -> Result<AgentRow> {
        let conn = self.store.read()?;
        self.row_at(&conn, registry, path)?.ok_or_else(|| {
            Error::new(
                ErrorCode::UnknownReference,
                format!(
                    "Unknown thread {path}. Repair: run agent_status to list the threads you can address, or agent_spawn it first."
                ),
            )
        })
    }

    fn is_mine(&self, row: &AgentRow) -> bool {
        let me = self.rt.owner();
        row.owner_pid == Some(me.pid) && row.owner_started_at == Some(me.started_at)
    }

    fn owner_alive(&self, row: &AgentRow) -> bool {
        match (row.owner_pid, row.owner_started_at) {
            (Some(pid), Some(started_at)) => {
                crate::runtime::process::ProcessIdentity { pid, started_at }.is_alive()
            }
            _ => false,
        }
    }

    /// A thread claimed by a serve that died after this one started (so no restore pass saw
    /// it) is restored first: nobody would ever settle it or deliver to it. Working threads
    /// come back paused.
    fn restored_if_orphaned(&self, row: AgentRow) -> Result<AgentRow> {
        if (row.live || row.active()) && !self.is_mine(&row) && !self.owner_alive(&row) {
            crate::runtime::restore::restore_dead_owners(&self.store, self.rt.owner())?;
            return self.row_by_id(&row.id);
        }
        Ok(row)
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
    fn own_row(&self, registry: i64) -> Result<AgentRow> {
        let conn = self.store.read()?;
        self.row_at(&conn, registry, self.caller())?.ok_or_else(|| {
            Error::new(
                ErrorCode::UnknownReference,
                format!(
                    "Unknown thread {}. Repair: run this tool from an agent spawned with agent_spawn in this session's registry.",
                    self.caller()
                ),
            )
        })
    }

    // ---- requests ---------------------------------------------------------------------------

    /// Runs one `agent_*` request.
    pub async fn call(self: &Arc<Self>, method: &str, params: &Value) -> Result<Vec<u8>> {
        let req = contract::parse(method, params)?;
        let registry = self.registry()?;
        match req {
            AgentRequest::Spawn {
                path,
                task,
                kind,
                wait,
                timeout_ms,
            } => {
                self.spawn(registry, &path, task, &kind, wait, timeout_ms)
                    .await
            }
            AgentRequest::Wait { path, timeout_ms } => {
                let path = paths::resolve_agent_path(&path, self.caller())?;
                self.check_access(&path, false)?;
                let row = self.known(registry, &path)?;
                let _held = self.hold_notices(&row.id);
                let row = self.wait_settled(&row.id, timeout_ms).await?;
                self.reported(row)
            }
            AgentRequest::Steer { path, message } => self.steer(registry, &path, message).await,
            AgentRequest::Status { path } => self.status(registry, path.as_deref()),
            AgentRequest::Update { message } => self.update(registry, &message),
            AgentRequest::Pause { reason } => self.pause(registry, &reason),
            AgentRequest::Stop { path } => self.stop(registry, &path).await,
            AgentRequest::Output {
                path,
                offset,
                limit,
            } => {
                let path = paths::resolve_agent_path(&path, self.caller())?;
                self.check_access(&path, true)?;
                if path == ROOT {
                    // Only the root reads itself: the main session has no answer to page.
                    return answer(&contract::output_page(ROOT, "", offset, limit));
                }
                let row = self.known(registry, &path)?;
                // Only a completed run hands back an answer (none from a paused turn).
                let out = match row.state {
                    AgentState::Completed => row.output.as_deref().unwrap_or(""),
                    _ => "",
                };
                answer(&contract::output_page(&row.path, out, offset, limit))
            }
        }
    }

    async fn spawn(
        self: &Arc<Self>,
        registry: i64,
        path: &str,
        task: String,
        kind: &str,
        wait: bool,
        timeout_ms: Option<u64>,
    ) -> Result<Vec<u8>> {
        let root = self.caller_is_root();
        if !root {
            let me = self.own_row(registry)?;
            if !me.active() || me.stop_requested {
                return Err(Error::forbidden(format!(
                    "Only a working agent may spawn children. Repair: {} is {}; spawn from a running agent, or ask the parent to resume this one.",
                    me.path,
                    if me.stop_requested { "stopping" } else { me.state.as_str() }
                )));
            }
        }
        let path = paths::resolve_agent_path(path, self.caller())?;
        self.check_access(&path, false)?;
        let parent = paths::parent_path(&path).map(str::to_string);
        let id = crate::ids::new_thread_id();
        let level = paths::agent_level(&path);
        let owner = self.rt.owner();
        let cwd = self.cfg.cwd.display().to_string();
        let name = format!("{kind} {path}");
        // From the insert on, the thread is starting: a stop meanwhile waits for its child.
        let _launching = self.rt.reserve_launch(&id);
        let parent_row = self.store.write(|tx| {
            if self.row_at(tx, registry, &path)?.is_some() {
                return Err(Error::conflict(format!(
                    "Thread {path} already exists; use agent_steer to resume it. Repair: call agent_steer with this path, or pick a new path."
                )));
            }
            let parent_row = match parent.as_deref() {
                Some(p) if p != ROOT => Some(self.row_at(tx, registry, p)?.ok_or_else(|| {
                    Error::new(
                        ErrorCode::UnknownReference,
                        format!("Unknown thread {p}. Repair: a nested parent must already exist; spawn {p} first, or choose a path under an existing thread."),
                    )
                })?),
                _ => None,
            };
            if !root && parent.as_deref() != Some(self.caller()) {
                return Err(Error::forbidden(format!(
                    "An agent may spawn only its immediate children. Repair: spawn \"{}/<name>\" (or just \"<name>\").",
                    self.caller()
                )));
            }
            if task.trim().is_empty() {
                return Err(Error::invalid(
                    "Task must not be empty. Repair: describe the task the child should do.",
                ));
            }
            if level > self.limits.max_levels {
                return Err(Error::new(
                    ErrorCode::Limit,
                    format!(
                        "Agent depth limit reached. Repair: {path} would be level {level} and the limit is {} (the main conversation is level 1); spawn at a shallower path, or raise PI_SUBAGENTS_MAX_LEVELS.",
                        self.limits.max_levels
                    ),
                ));
            }
            let total: i64 = tx
                .prepare_cached(include_str!("../../sql/agent_count_all.sql"))?
                .query_row([registry], |r| r.get(0))?;
            if total >= self.limits.max_threads {
                return Err(Error::new(
                    ErrorCode::Limit,
                    format!(
                        "Total thread limit reached. Repair: {total} of {} threads are retained, completed ones included; resume an existing thread with agent_steer instead, or raise PI_SUBAGENTS_MAX_THREADS.",
                        self.limits.max_threads
                    ),
                ));
            }
            self.check_capacity(tx, registry)?;
            self.check_budget(tx, parent_row.as_ref().map(|r| r.id.as_str()), "agent_spawn")?;
            if let Some(p) = parent.as_deref() {
                self.check_no_stopped_ancestor(tx, registry, p)?;
            }
            insert_thread(
                tx,
                &NewThread {
                    id: id.clone(),
                    manager_id: registry,
                    path: path.clone(),
                    parent_path: parent.clone(),
                    parent_id: parent_row.as_ref().map(|r| r.id.clone()),
                    task_name: paths::basename(&path).to_string(),
                    name: name.clone(),
                    depth: (level - 1) as i64,
                    cwd: cwd.clone(),
                    args: Vec::new(),
                    status: "live",
                    phase: "starting",
                    agent_state: Some("starting"),
                    prompt: Some(task.clone()),
                    task: Some(task.clone()),
                    ..Default::default()
                },
            )?;
            tx.prepare_cached(include_str!("../../sql/agent_set_new.sql"))?
                .execute(named_params! {
                    ":status": contract::STATUS_STARTING, ":owner_pid": owner.pid,
                    ":owner_started": owner.started_at, ":at": now_iso(), ":id": id,
                })?;
            Ok(parent_row)
        });
        let parent_row = parent_row?;
        let _held = self.hold_notices(&id);
        let started = async {
            let file = self.write_child_session(&id, &path, &name, parent_row.as_ref())?;
            // What a detached spawn answers: the thread as its run starts, like the original
            // (its view is taken right after the run is started, before the prompt lands).
            let starting = self.row_by_id(&id)?;
            self.launch(&id, task.clone(), Some(file)).await?;
            Ok::<_, Error>(starting)
        }
        .await;
        let starting = match started {
            Ok(row) => row,
            Err(e) => {
                self.close_unlaunched(&id, &e.message)?;
                self.settle(&id, AgentState::Failed, None, Some(e.message.clone()))?;
                // The error is the tool result; its "failed" notice would repeat it.
                self.supersede_notices(&id)?;
                return Err(e);
            }
        };
        if wait {
            let row = self.wait_settled(&id, timeout_ms).await?;
            self.reported(row)
        } else {
            answer(&starting.view())
        }
    }

    /// A reserved thread whose process never started is closed as failed, so no live row
    /// claims a process that never existed.
    fn close_unlaunched(&self, id: &str, message: &str) -> Result<()> {
        self.store.write(|tx| {
            tx.prepare_cached(include_str!("../../sql/thread_close_unlaunched.sql"))?
                .execute((id, message, now_iso()))?;
            Ok(())
        })
    }

    /// Refuses `action` once the tree of `thread_id` (else of this session's registry) has
    /// reached a budget cap.
    fn check_budget(&self, conn: &Connection, thread_id: Option<&str>, action: &str) -> Result<()> {
        let of = crate::store::usage::TreeOf {
            thread_id,
            self_id: self.cfg.self_id.as_deref(),
            session_id: &self.cfg.root_session_id,
        };
        self.cfg.budget.check(conn, of, action)
    }

    fn check_capacity(&self, conn: &Connection, registry: i64) -> Result<()> {
        let active: i64 = conn
            .prepare_cached(include_str!("../../sql/agent_count_active.sql"))?
            .query_row([registry], |r| r.get(0))?;
        if active >= self.limits.max_concurrent {
            return Err(Error::new(
                ErrorCode::Limit,
                format!(
                    "Concurrent thread limit reached; wait for a thread to settle. Repair: {active} of {} threads are working; agent_wait on one of them first, or raise PI_SUBAGENTS_MAX_CONCURRENT.",
                    self.limits.max_concurrent
                ),
            ));
        }
        Ok(())
    }

    fn check_no_stopped_ancestor(
        &self,
        conn: &Connection,
        registry: i64,
        path: &str,
    ) -> Result<()> {
        let stopped: Option<String> = conn
            .prepare_cached(include_str!("../../sql/agent_stopped_ancestor.sql"))?
            .query_row(named_params! {":path": path, ":manager": registry}, |r| {
                r.get(0)
            })
            .optional()?;
        match stopped {
            None => Ok(()),
            Some(s) => Err(Error::conflict(format!(
                "Cannot continue under stopped ancestor {s}; resume it first. Repair: agent_steer {s} with a message, then retry."
            ))),
        }
    }

    /// The root conversation's session file, if the registry knows one.
    fn root_session_file(&self) -> Result<Option<PathBuf>> {
        let conn = self.store.read()?;
        let registry = self.registry()?;
        let file: Option<String> = conn
            .query_row(
                "SELECT session_file FROM managers WHERE id = ?1",
                [registry],
                |r| r.get(0),
            )
            .optional()?
            .flatten();
        Ok(file.map(PathBuf::from))
    }

    /// Creates the child's session file: a frozen snapshot of its lexical parent's branch
    /// (nothing for an independent root), linked to the parent's file.
    fn write_child_session(
        &self,
        id: &str,
        path: &str,
        name: &str,
        parent_row: Option<&AgentRow>,
    ) -> Result<PathBuf> {
        let root_file = self.root_session_file()?;
        let independent = paths::is_independent_root(path);
        let parent_file: Option<PathBuf> = match parent_row {
            Some(p) => Some(PathBuf::from(p.session_file.clone().ok_or_else(|| {
                Error::io(format!(
                    "The parent thread {} has no session file yet. Repair: wait until it has started, then retry.",
                    p.path
                ))
            })?)),
            None => root_file.clone(),
        };
        let inherit_from = if independent {
            None
        } else {
            match &parent_file {
                Some(f) if f.exists() => Some(crate::pi::session::SessionFile::read(f)?),
                Some(f) if parent_row.is_some() => {
                    return Err(Error::io(format!(
                        "The parent's session file {} does not exist, so the child cannot inherit its context. Repair: resume the parent so it writes its session, or spawn an independent root instead.",
                        f.display()
                    )))
                }
                _ => None,
            }
        };
        let dir = self.session_dir(root_file.as_deref());
        let session_id = crate::pi::session::uuid_v7();
        let file = dir.join(crate::pi::session::session_file_name(
            &now_iso(),
            &session_id,
        ));
        let link = parent_file.filter(|f| f.exists());
        crate::pi::session::write_subagent_session(
            inherit_from.as_ref(),
            &file,
            &session_id,
            &self.cfg.cwd,
            link.as_deref(),
            name,
            json!({"rootId": self.cfg.root_session_id, "threadPath": path}),
        )?;
        self.store.write(|tx| {
            tx.prepare_cached(include_str!("../../sql/thread_set_session.sql"))?
                .execute(named_params! {
                    ":file": file.display().to_string(), ":session_id": session_id,
                    ":at": now_iso(), ":id": id,
                })?;
            Ok(())
        })?;
        Ok(file)
    }

    /// Children live in the main session's directory.
    fn session_dir(&self, root_file: Option<&Path>) -> PathBuf {
        if let Some(dir) = root_file.and_then(Path::parent) {
            return dir.to_path_buf();
        }
        match self.cfg.session_file.as_deref().and_then(Path::parent) {
            Some(dir) => dir.to_path_buf(),
            None => crate::pi::session::session_dir_for(&self.cfg.agent_dir, &self.cfg.cwd),
        }
    }

    /// Launches one run of a reserved thread with `prompt`, on its session file, and starts
    /// supervising it.
    async fn launch(
        self: &Arc<Self>,
        id: &str,
        prompt: String,
        file: Option<PathBuf>,
    ) -> Result<()> {
        let row = self.row_by_id(id)?;
        let file = match file.or_else(|| row.session_file.clone().map(PathBuf::from)) {
            Some(f) => f,
            None => {
                return Err(Error::new(
                    ErrorCode::NotResumable,
                    format!(
                        "{} has no session file. Repair: spawn a new thread instead.",
                        row.path
                    ),
                ))
            }
        };
        if !file.exists() {
            return Err(Error::new(
                ErrorCode::NotResumable,
                format!(
                    "Cannot resume {}: its Pi session file does not exist: {}. Repair: spawn a new thread; the old session history is gone.",
                    row.path,
                    file.display()
                ),
            ));
        }
        let cwd = PathBuf::from(&row.cwd);
        let inherited = argpolicy::inherited_args(&self.cfg.parent_args, &self.cfg.cwd);
        let approve = argpolicy::should_approve(self.cfg.trusted, &self.cfg.cwd, &cwd);
        let argv = crate::pi::flags::child_argv(
            &self.cfg.pi_command,
            &inherited,
            Some(&file),
            &row.name,
            approve,
        );
        let outcome = self
            .rt
            .launch(LaunchSpec {
                thread_id: id.to_string(),
                argv,
                cwd,
                env: self.child_env(&row),
                clear_env: false,
                start: StartKind::Prompt(prompt),
            })
            .await?;
        if outcome.prompt_accepted == Some(false) {
            let why = outcome
                .note
                .unwrap_or_else(|| "The child rejected the prompt.".into());
            let _ = self.rt.stop(id, false).await;
            return Err(Error::io(format!(
                "{} could not start its run: {why} Repair: check the child's model and credentials, then agent_steer it to retry.",
                row.path
            )));
        }
        if outcome.prompt_accepted == Some(true) {
            self.mark_running(id)?;
        }
        self.supervise(id.to_string());
        Ok(())
    }

    fn child_env(&self, row: &AgentRow) -> Vec<(String, String)> {
        let l = self.limits;
        vec![
            ("THREADBASE_DB".into(), self.cfg.db.display().to_string()),
            ("PI_THREADS_PATH".into(), row.path.clone()),
            (
                "PI_THREADS_DEPTH".into(),
                (paths::agent_level(&row.path) - 1).to_string(),
            ),
            ("PI_THREADS_SELF_ID".into(), row.id.clone()),
            (
                "PI_THREADS_PARENT_PATH".into(),
                row.parent_path.clone().unwrap_or_else(|| ROOT.to_string()),
            ),
            (
                "PI_THREADS_ROOT_SESSION_ID".into(),
                self.cfg.root_session_id.clone(),
            ),
            ("PI_SUBAGENTS_MAX_LEVELS".into(), l.max_levels.to_string()),
            ("PI_SUBAGENTS_MAX_THREADS".into(), l.max_threads.to_string()),
            (
                "PI_SUBAGENTS_MAX_CONCURRENT".into(),
                l.max_concurrent.to_string(),
            ),
        ]
    }

    fn mark_running(&self, id: &str) -> Result<()> {
        self.store.write(|tx| {
            tx.prepare_cached(include_str!("../../sql/agent_mark_running.sql"))?
                .execute(named_params! {":status": contract::STATUS_WORKING, ":at": now_iso(), ":id": id})?;
            Ok(())
        })
    }

    /// Records a settlement and its notice for the parent in one transaction. Returns false
    /// when the thread was not working (someone settled it first).
    fn settle(
        &self,
        id: &str,
        state: AgentState,
        output: Option<String>,
        error: Option<String>,
    ) -> Result<bool> {
        // A stopped run keeps the error its aborted run ends with, as the original's does.
        let error = match state {
            AgentState::Stopped => error.or_else(|| Some(contract::RUN_ABORTED.to_string())),
            _ => error,
        };
        let status = match state {
            AgentState::Completed => Some(contract::STATUS_COMPLETED.to_string()),
            AgentState::Stopped => Some(contract::STATUS_STOPPED.to_string()),
            // A failed thread's status is its error text.
            AgentState::Failed => error.clone(),
            _ => None, // paused keeps its reason
        };
        self.store.write(|tx| {
            let at = now_iso();
            let settled: Option<(String, Option<String>, Option<String>, i64)> = tx
                .prepare_cached(include_str!("../../sql/agent_settle.sql"))?
                .query_row(
                    named_params! {
                        ":state": state.as_str(), ":status": status, ":output": output, ":error": error,
                        ":at": at, ":id": id,
                    },
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .optional()?;
            let Some((path, parent, status_text, launch_seq)) = settled else {
                return Ok(false);
            };
            let status_text = status_text.unwrap_or_default();
            let text = contract::settled_notice(&path, state, &status_text, output.as_deref());
            let recipient = parent.unwrap_or_else(|| ROOT.to_string());
            // A request of this serve holds the thread and returns this settlement itself: the
            // notice is written delivered, so another serve of the same caller cannot send it
            // before the request supersedes it (the hold is this process's alone).
            let quiet = recipient == self.caller() && self.notices_held(id);
            let written = tx
                .prepare_cached(include_str!("../../sql/agent_mailbox_insert.sql"))?
                .execute(named_params! {
                    ":thread_id": id, ":direction": "to_parent", ":kind": "notice",
                    ":send_key": format!("settled:{launch_seq}:{at}"), ":body": text,
                    ":recipient": recipient, ":at": at,
                    ":state": if quiet { "delivered" } else { "pending" },
                })?;
            if quiet && written == 1 {
                let row = tx.last_insert_rowid();
                if let Some(h) = self
                    .held
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .get_mut(id)
                {
                    h.quiet.push(row);
                }
            }
            Ok(true)
        })
    }

    /// Waits until the thread is not working (or the timeout passes) and returns it.
    async fn wait_settled(&self, id: &str, timeout_ms: Option<u64>) -> Result<AgentRow> {
        let deadline = timeout_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        let mut next_owner_check = Instant::now() + OWNER_CHECK;
        loop {
            let mut row = self.row_by_id(id)?;
            if row.active() && Instant::now() >= next_owner_check {
                // Instead of waiting forever on a thread nobody runs any more.
                next_owner_check = Instant::now() + OWNER_CHECK;
                row = self.restored_if_orphaned(row)?;
            }
            if !row.active() || deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(row);
            }
            let nap = match deadline {
                Some(d) => WAIT_POLL.min(d.saturating_duration_since(Instant::now())),
                None => WAIT_POLL,
            };
            tokio::time::sleep(nap).await;
        }
    }

    // ---- steer --------------------------------------------------------------------------------

    async fn steer(
        self: &Arc<Self>,
        registry: i64,
        path: &str,
        message: String,
    ) -> Result<Vec<u8>> {
        if !self.caller_is_root() {
            let me = self.own_row(registry)?;
            if me.stop_requested {
                return Err(Error::forbidden(format!(
                    "Stopping agents may not steer descendants. Repair: {} is stopping; wait until it is resumed.",
                    me.path
                )));
            }
        }
        let path = paths::resolve_agent_path(path, self.caller())?;
        self.check_access(&path, false)?;
        if message.trim().is_empty() {
            return Err(Error::invalid(
                "Steering message must not be empty. Repair: say what the thread should do next.",
            ));
        }
        // So that this steer resumes it here.
        let target = self.restored_if_orphaned(self.known(registry, &path)?)?;
        let target = self.after_retirement(registry, target).await?;
        // One transaction: the checks, the resume reservation (if settled) and the row.
        let reserved = self.store.write(|tx| {
            let row = self.row_at(tx, registry, &path)?.ok_or_else(|| {
                Error::new(ErrorCode::UnknownReference, format!("Unknown thread {path}. Repair: run agent_status to list the threads you can address."))
            })?;
            if row.stop_requested && row.active() {
                return Err(Error::conflict(format!(
                    "Thread is stopping; wait for stopped state before resuming. Repair: agent_wait {path}, then steer it again."
                )));
            }
            self.check_budget(tx, Some(&row.id), "agent_steer")?;
            let mut reserved = None;
            if !row.active() {
                self.check_no_stopped_ancestor(tx, registry, row.parent_path.as_deref().unwrap_or(""))?;
                self.check_capacity(tx, registry)?;
                // A process another serve still holds (it hosts working descendants) runs
                // the resume there; otherwise this serve runs it.
                let runner = self.holder_elsewhere(&row).unwrap_or_else(|| self.rt.owner());
                tx.prepare_cached(include_str!("../../sql/agent_reserve_resume.sql"))?
                    .execute(named_params! {
                        ":status": contract::STATUS_STARTING, ":owner_pid": runner.pid,
                        ":owner_started": runner.started_at, ":at": now_iso(), ":id": row.id,
                    })?;
                reserved = Some(runner == self.rt.owner());
            }
            tx.prepare_cached(include_str!("../../sql/agent_mailbox_insert.sql"))?
                .execute(named_params! {
                    ":thread_id": row.id, ":direction": "to_child", ":kind": "steer",
                    ":send_key": format!("steer:{}", crate::ids::random_hex(16)), ":body": message,
                    ":recipient": None::<String>, ":at": now_iso(), ":state": "pending",
                })?;
            Ok(reserved)
        })?;
        let row = self.row_by_id(&target.id)?;
        // A steer that starts a new run answers with the thread as that run starts (the
        // original's view right after it is started); a steer into a working run, with the
        // view after delivery.
        let starting = reserved.is_some().then(|| row.clone());
        if reserved == Some(true)
            || (row.live && self.is_mine(&row))
            || (!row.live && !self.owner_alive(&row))
        {
            // This serve runs it: a resumed run here, or a steer into a process it holds.
            self.deliver(&row.id).await?;
        } else {
            // Another serve holds the process: its watcher delivers the row.
            let deadline = Instant::now() + STEER_HANDOFF_WAIT;
            while Instant::now() < deadline {
                if self
                    .pending_steers(&row.id)?
                    .iter()
                    .all(|s| s.sent_to.is_some())
                {
                    break;
                }
                tokio::time::sleep(WAIT_POLL).await;
            }
        }
        match starting {
            Some(row) => answer(&row.view()),
            None => answer(&self.row_by_id(&target.id)?.view()),
        }
    }

    /// The serve that holds a live process for `row`, when that is another living serve.
    fn holder_elsewhere(&self, row: &AgentRow) -> Option<crate::runtime::process::ProcessIdentity> {
        if !row.live || self.is_mine(row) || !self.owner_alive(row) {
            return None;
        }
        Some(crate::runtime::process::ProcessIdentity {
            pid: row.owner_pid?,
            started_at: row.owner_started_at?,
        })
    }

    /// A settled thread whose process another serve still holds, with no working
    /// descendants, is being retired by that serve: a resume waits (bounded) for the process
    /// to end, so that it runs here and two Pi processes never share one session file. A
    /// process that hosts working descendants stays, and its holder runs the resume.
    async fn after_retirement(&self, registry: i64, mut row: AgentRow) -> Result<AgentRow> {
        let deadline = Instant::now() + RETIREMENT_WAIT;
        while !row.active() && self.holder_elsewhere(&row).is_some() && Instant::now() < deadline {
            if self.working_descendants(registry, &row.path)? > 0 {
                break;
            }
            tokio::time::sleep(WAIT_POLL).await;
            row = self.restored_if_orphaned(self.row_by_id(&row.id)?)?;
        }
        Ok(row)
    }

    /// How many threads under `path` are starting or running.
    fn working_descendants(&self, registry: i64, path: &str) -> Result<i64> {
        let (lo, hi) = paths::descendant_range(path);
        Ok(self
            .store
            .read()?
            .prepare_cached(include_str!("../../sql/agent_count_active_under.sql"))?
            .query_row((registry, &lo, &hi), |r| r.get(0))?)
    }

    fn pending_steers(&self, id: &str) -> Result<Vec<Steer>> {
        let conn = self.store.read()?;
        let mut stmt = conn.prepare_cached(include_str!("../../sql/agent_steers_pending.sql"))?;
        let rows = stmt.query_map([id], |r| {
            Ok(Steer {
                id: r.get(0)?,
                body: r.get(1)?,
                created_at: r.get(2)?,
                sent_to: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Delivers a thread's pending steering (this serve holds or will hold its process): a
    /// message already in the transcript is marked consumed; with no live process the first
    /// message starts a new run on the same session; the rest go into Pi's steering queue.
    async fn deliver(self: &Arc<Self>, id: &str) -> Result<()> {
        let lock = self.lock(id);
        let _guard = lock.lock().await;
        let row = self.row_by_id(id)?;
        let current = row.launch_seq.to_string();
        let mut pending = self.unconsumed_steers(&row)?;
        // Sent to the run that is live now: that run consumes it.
        pending.retain(|s| !(row.live && s.sent_to.as_deref() == Some(current.as_str())));
        if pending.is_empty() {
            return Ok(());
        }
        let mut rest = pending.into_iter();
        // With no live process here, the first message starts a new run.
        let mut launched_with = None;
        if !self.rt.is_live(id) {
            if row.live && !self.is_mine(&row) && self.owner_alive(&row) {
                return Ok(()); // another serve's process; it delivers
            }
            if !row.active() {
                // Nothing reserved a run (a stale row): leave the steer for the next resume.
                return Ok(());
            }
            let first = rest.next().expect("non-empty");
            if let Err(e) = self.launch(id, first.body, None).await {
                self.settle(id, AgentState::Failed, None, Some(e.message.clone()))?;
                return Err(e);
            }
            launched_with = Some(first.id);
        }
        let launch_seq = self.row_by_id(id)?.launch_seq;
        if let Some(mailbox_id) = launched_with {
            self.mark_sent(mailbox_id, launch_seq)?;
        }
        for s in rest {
            let out = self.rt.send(id, SendMode::Steer, &s.body).await?;
            if out.accepted == Some(true) {
                self.mark_sent(s.id, launch_seq)?;
            }
        }
        Ok(())
    }

    fn mark_sent(&self, mailbox_id: i64, launch_seq: i64) -> Result<()> {
        self.store.write(|tx| {
            tx.prepare_cached(include_str!("../../sql/agent_steer_sent.sql"))?
                .execute(named_params! {":launch": launch_seq.to_string(), ":id": mailbox_id})?;
            Ok(())
        })
    }

    fn consume(&self, mailbox_id: i64) -> Result<bool> {
        self.store.write(|tx| {
            Ok(tx
                .prepare_cached(include_str!("../../sql/agent_mailbox_consumed.sql"))?
                .execute((mailbox_id, now_iso()))?
                > 0)
        })
    }

    /// A thread's pending steers that its transcript does not show yet; the ones it shows were
    /// consumed by a run (perhaps before a crash) and are marked so, never sent again.
    fn unconsumed_steers(&self, row: &AgentRow) -> Result<Vec<Steer>> {
        let pending = self.pending_steers(&row.id)?;
        if pending.is_empty() {
            return Ok(pending);
        }
        let transcript = row
            .session_file
            .as_deref()
            .and_then(|f| crate::pi::session::SessionFile::read(f).ok());
        let mut unconsumed = Vec::with_capacity(pending.len());
        for s in pending {
            if transcript
                .as_ref()
                .is_some_and(|t| user_message_since(t, &s.body, &s.created_at))
            {
                self.consume(s.id)?;
            } else {
                unconsumed.push(s);
            }
        }
        Ok(unconsumed)
    }

    // ---- status, update, pause, stop ------------------------------------------------------

    /// One view, or (without a path) the bare list of views the caller may address in spawn
    /// order: every thread for the root; a child itself and its descendants.
    fn status(&self, registry: i64, path: Option<&str>) -> Result<Vec<u8>> {
        let conn = self.store.read()?;
        // The original lists when the path is absent or empty (`params.path ? get : list`).
        if let Some(p) = path.filter(|p| !p.is_empty()) {
            let t = paths::resolve_agent_path(p, self.caller())?;
            self.check_access(&t, true)?;
            if t == ROOT {
                // Only the root reads itself: the original's pseudo-view of the main session.
                return answer(&contract::main_session_view(crate::time::now_ms()));
            }
            let row = self.row_at(&conn, registry, &t)?.ok_or_else(|| {
                Error::new(
                    ErrorCode::UnknownReference,
                    format!("Unknown thread {t}. Repair: run agent_status without a path to list the threads you can address."),
                )
            })?;
            return answer(&row.view());
        }
        let rows: Vec<AgentRow> = if self.caller_is_root() {
            let mut stmt = conn.prepare_cached(include_str!("../../sql/agent_threads_all.sql"))?;
            let rows = stmt.query_map([registry], AgentRow::from_row)?;
            rows.collect::<rusqlite::Result<_>>()?
        } else {
            let (lo, hi) = paths::descendant_range(self.caller());
            let mut stmt =
                conn.prepare_cached(include_str!("../../sql/agent_threads_under.sql"))?;
            let rows = stmt.query_map(
                rusqlite::params![registry, self.caller(), lo, hi],
                AgentRow::from_row,
            )?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let views: Vec<AgentView<'_>> = rows.iter().map(AgentRow::view).collect();
        answer(&views)
    }

    /// A working child reports progress: its status changes and its parent gets a notice.
    fn update(&self, registry: i64, message: &str) -> Result<Vec<u8>> {
        let me = self.working_self(registry, "Only a working child may report progress")?;
        let text = contract::progress_notice(&me.path, message);
        self.store.write(|tx| {
            let at = now_iso();
            tx.prepare_cached(include_str!("../../sql/agent_set_status.sql"))?
                .execute(named_params! {":status": message, ":at": at, ":id": me.id})?;
            tx.prepare_cached(include_str!("../../sql/agent_mailbox_insert.sql"))?
                .execute(named_params! {
                    ":thread_id": me.id, ":direction": "to_parent", ":kind": "progress",
                    ":send_key": format!("progress:{}", crate::ids::random_hex(16)), ":body": text,
                    ":recipient": me.parent_path.clone().unwrap_or_else(|| ROOT.to_string()), ":at": at,
                    ":state": "pending",
                })?;
            Ok(())
        })?;
        answer(&self.row_by_id(&me.id)?.view())
    }

    /// A working child asks to pause: it settles as paused when this run ends (the tool
    /// result carries `terminate: true`, which ends the run at the turn boundary).
    fn pause(&self, registry: i64, reason: &str) -> Result<Vec<u8>> {
        let me = self.working_self(registry, "Only a working child may pause itself")?;
        let status = if reason.trim().is_empty() {
            contract::STATUS_PAUSED_DEFAULT.to_string()
        } else {
            reason.trim().to_string()
        };
        self.store.write(|tx| {
            tx.prepare_cached(include_str!("../../sql/agent_request_pause.sql"))?
                .execute(named_params! {":status": status, ":at": now_iso(), ":id": me.id})?;
            Ok(())
        })?;
        // `terminate`: the extension returns it as the tool result's, ending the run.
        contract::tool_result(
            &contract::Paused {
                path: &me.path,
                pause_requested: true,
                status: &status,
            },
            true,
        )
    }

    /// The caller's own row, which must be working (`agent_update`, `agent_pause`); `refusal`
    /// is the original's text for a caller that is not.
    fn working_self(&self, registry: i64, refusal: &str) -> Result<AgentRow> {
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

    /// Stops the target, in any state, and its working descendants, deepest first, across
    /// processes. A stopped target refuses spawns and steers beneath it until it is resumed.
    async fn stop(self: &Arc<Self>, registry: i64, path: &str) -> Result<Vec<u8>> {
        let path = paths::resolve_agent_path(path, self.caller())?;
        self.check_access(&path, false)?;
        let target = self.known(registry, &path)?;
        // The result is the stopped view: no "stopped" notice for what the caller did itself.
        let _held = self.hold_notices(&target.id);
        let (lo, hi) = paths::descendant_range(&path);
        let targets: Vec<StopTarget> = self.store.write(|tx| {
            let mut stmt = tx.prepare_cached(include_str!("../../sql/agent_stop_targets.sql"))?;
            let rows = stmt.query_map((registry, &path, &lo, &hi), |r| {
                Ok(StopTarget {
                    id: r.get(0)?,
                    depth: paths::segment_count(&r.get::<_, String>(1)?),
                    live: r.get::<_, String>(2)? == "live",
                    active: r
                        .get::<_, Option<String>>(3)?
                        .as_deref()
                        .and_then(AgentState::parse)
                        .is_some_and(AgentState::active),
                })
            })?;
            let rows: Vec<_> = rows.collect::<rusqlite::Result<_>>()?;
            for t in &rows {
                if t.active {
                    tx.prepare_cached(include_str!("../../sql/agent_request_stop.sql"))?
                        .execute(named_params! {":status": contract::STATUS_STOPPING, ":at": now_iso(), ":id": t.id})?;
                } else {
                    // At once, in this transaction: from here on nothing spawns or resumes
                    // beneath it.
                    tx.prepare_cached(include_str!("../../sql/agent_stop_settled.sql"))?
                        .execute(named_params! {":status": contract::STATUS_STOPPED, ":at": now_iso(), ":id": t.id})?;
                }
            }
            Ok(rows)
        })?;
        // Deepest level first, so a child's own serve stops its children before it goes.
        let mut levels: Vec<Vec<&StopTarget>> = Vec::new();
        for t in &targets {
            match levels.last_mut() {
                Some(level) if level[0].depth == t.depth => level.push(t),
                _ => levels.push(vec![t]),
            }
        }
        for level in levels {
            let mut ids = Vec::new();
            for StopTarget {
                id, live, active, ..
            } in level
            {
                if !active {
                    // The settled target, stopped in the transaction above: no run to end. Its
                    // process (if it still hosts the descendants stopped above) retires.
                    self.retire_if_done(id).await?;
                    continue;
                }
                // A run whose launch is under way here is stopped once its child exists.
                self.rt.await_launch(id, crate::runtime::LAUNCH_WAIT).await;
                let row = self.row_by_id(id)?;
                if self.rt.is_live(id) {
                    let host = self.clone();
                    let id = id.clone();
                    tokio::spawn(async move {
                        let _ = host.rt.stop(&id, false).await;
                    });
                } else if *live && self.owner_alive(&row) {
                    self.store.write(|tx| {
                        tx.prepare_cached(include_str!("../../sql/top_command_insert.sql"))?
                            .execute((id, "stop", now_iso()))?;
                        Ok(())
                    })?;
                } else {
                    // No process anywhere (a run reserved but not started, or an owner that
                    // is gone): settled at once.
                    self.settle(id, AgentState::Stopped, None, None)?;
                }
                ids.push(id.clone());
            }
            let deadline = Instant::now() + STOP_WAIT;
            for id in ids {
                let left = deadline.saturating_duration_since(Instant::now());
                self.wait_settled(&id, Some(left.as_millis() as u64))
                    .await?;
            }
        }
        let row = self.row_by_id(&target.id)?;
        self.reported(row)
    }

    // ---- supervision --------------------------------------------------------------------------

    /// Follows one launched run: running when the child starts working, a settlement each
    /// time it goes idle, and the close of its process.
    fn supervise(self: &Arc<Self>, id: String) {
        let host = self.clone();
        let Some(mut view) = self.rt.watch(&id) else {
            // The process ended while its launch ran (stopped or gone before it answered):
            // nothing else would record the end of this run, and a wait would never return.
            tokio::spawn(async move {
                if let Err(e) = host.on_closed(&id).await {
                    eprintln!("threadbase serve: recording the end of {id} failed: {e}");
                }
            });
            return;
        };
        tokio::spawn(async move {
            let mut handled = 0u64;
            let mut marked_running = false;
            loop {
                let v = view.borrow_and_update().clone();
                if v.closed {
                    break;
                }
                if !marked_running && v.phase == crate::runtime::mapping::Phase::Busy {
                    marked_running = host.mark_running(&id).is_ok();
                }
                if v.settles > handled {
                    handled = v.settles;
                    marked_running = false;
                    if let Err(e) = host.on_settled(&id).await {
                        tracing::error!("settling {id} failed: {e}");
                    }
                }
                if view.changed().await.is_err() {
                    break;
                }
            }
            if let Err(e) = host.on_closed(&id).await {
                tracing::error!("recording the end of {id} failed: {e}");
            }
        });
    }

    async fn on_settled(self: &Arc<Self>, id: &str) -> Result<()> {
        let lock = self.lock(id);
        let guard = lock.lock().await;
        let row = self.row_by_id(id)?;
        if row.active() && self.is_mine(&row) {
            // Confirm with the child that nothing is queued (a steer may have just arrived).
            match self.rt.refresh(id, Duration::from_secs(3)).await {
                Ok((true, _)) => {}
                Ok((false, _)) => return Ok(()),
                Err(_) => return Ok(()), // closed meanwhile: on_closed decides
            }
            self.rt.flush().await;
            let row = self.row_by_id(id)?;
            self.unconsumed_steers(&row)?;
            if row.stop_requested {
                self.settle(id, AgentState::Stopped, None, None)?;
            } else if row.pause_requested {
                self.settle(id, AgentState::Paused, None, None)?;
            } else if let Some(error) = self.run_error(id)? {
                self.settle(id, AgentState::Failed, None, Some(error))?;
            } else {
                let output = self.final_answer(id)?;
                self.settle(id, AgentState::Completed, Some(output), None)?;
            }
        }
        drop(guard);
        if !self.pending_steers(id)?.is_empty() {
            return self.deliver(id).await;
        }
        self.retire_if_done(id).await
    }

    /// The final assistant text of the run.
    fn final_answer(&self, id: &str) -> Result<String> {
        let conn = self.store.read()?;
        Ok(super::output_facts(&conn, id)?
            .last_assistant_text
            .unwrap_or_default())
    }

    /// The model error the run ended with, if its last message was one.
    fn run_error(&self, id: &str) -> Result<Option<String>> {
        let conn = self.store.read()?;
        let last: Option<(String, String)> = conn
            .prepare_cached(include_str!("../../sql/agent_last_outcome.sql"))?
            .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        Ok(match last {
            Some((kind, data)) if kind == "thread_error" => {
                let v: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
                Some(
                    v["message"]
                        .as_str()
                        .unwrap_or("The model returned an error.")
                        .to_string(),
                )
            }
            _ => None,
        })
    }

    async fn on_closed(self: &Arc<Self>, id: &str) -> Result<()> {
        let lock = self.lock(id);
        let guard = lock.lock().await;
        self.rt.flush().await;
        let row = self.row_by_id(id)?;
        // Not working, still running here, or reserved by another serve since: not ours to
        // settle.
        if !row.active() || self.rt.is_live(id) || !self.is_mine(&row) {
            return Ok(());
        }
        let pending = self.pending_steers(id)?;
        if row.state == AgentState::Starting
            && !row.stop_requested
            && !pending.is_empty()
            && self.is_mine(&row)
        {
            // A resume reserved while the process was retiring: run it now.
            drop(guard);
            return self.deliver(id).await;
        }
        self.unconsumed_steers(&row)?;
        if row.stop_requested {
            self.settle(id, AgentState::Stopped, None, None)?;
        } else {
            let conn = self.store.read()?;
            let message: Option<String> = conn
                .query_row(
                    "SELECT exit_message FROM threads WHERE id = ?1",
                    [id],
                    |r| r.get(0),
                )
                .optional()?
                .flatten();
            let error = message
                .unwrap_or_else(|| "The child Pi process ended before its run settled.".into());
            self.settle(id, AgentState::Failed, None, Some(error))?;
        }
        Ok(())
    }

    /// Ends a settled run's process once none of its descendants is working and no steer
    /// waits for it.
    async fn retire_if_done(self: &Arc<Self>, id: &str) -> Result<()> {
        let row = self.row_by_id(id)?;
        if row.active() || !self.rt.is_live(id) {
            return Ok(());
        }
        if self.working_descendants(self.registry()?, &row.path)? > 0
            || !self.pending_steers(id)?.is_empty()
        {
            return Ok(());
        }
        let host = self.clone();
        let id = id.to_string();
        tokio::spawn(async move {
            let lock = host.lock(&id);
            let _guard = lock.lock().await;
            // Re-check under the lock: a steer may have reserved a new run meanwhile.
            if host.row_by_id(&id).is_ok_and(|r| !r.active())
                && host.pending_steers(&id).is_ok_and(|p| p.is_empty())
            {
                let _ = host.rt.stop(&id, false).await;
            }
        });
        Ok(())
    }

    /// Before this serve shuts down: its working threads will settle as stopped.
    pub fn before_shutdown(&self) {
        let Some(registry) = self.registry.get().copied() else {
            return;
        };
        let me = self.rt.owner();
        let owned: Result<Vec<(String, Option<String>)>> = (|| {
            let conn = self.store.read()?;
            let mut stmt = conn.prepare_cached(include_str!("../../sql/agent_owned_live.sql"))?;
            let rows = stmt.query_map((registry, me.pid, me.started_at), |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })();
        for (id, state) in owned.unwrap_or_default() {
            if matches!(state.as_deref(), Some("starting" | "running")) {
                let _ = self.store.write(|tx| {
                    tx.prepare_cached(include_str!("../../sql/agent_request_stop.sql"))?
                        .execute(named_params! {":status": contract::STATUS_STOPPING, ":at": now_iso(), ":id": id})?;
                    Ok(())
                });
            }
        }
    }

    /// After this serve's children are stopped: its working threads settle as stopped now,
    /// while the process still runs (their supervisors may not get to it).
    pub fn after_shutdown(&self) {
        let Some(registry) = self.registry.get().copied() else {
            return;
        };
        let me = self.rt.owner();
        let ids: Result<Vec<String>> = (|| {
            let conn = self.store.read()?;
            let mut stmt = conn.prepare_cached(include_str!("../../sql/agent_owned_active.sql"))?;
            let rows = stmt.query_map((registry, me.pid, me.started_at), |r| r.get(0))?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })();
        for id in ids.unwrap_or_default() {
            if let Err(e) = self.settle(&id, AgentState::Stopped, None, None) {
                tracing::error!("recording the stop of {id} failed: {e}");
            }
        }
    }

    // ---- the row watcher ----------------------------------------------------------------------

    /// This serve's contract B rows after another connection committed (called by the row
    /// watcher with its own connection): notices for its agent path are claimed and emitted on
    /// `out`, and the threads whose process it holds with steering to deliver or a settled run
    /// to retire are returned for [`AgentHost::sweep`].
    pub(crate) fn rows_changed(
        &self,
        conn: &Connection,
        out: &crate::output::Output,
    ) -> Result<(Vec<String>, Vec<String>)> {
        let Some(registry) = self.existing_registry(conn)? else {
            return Ok((Vec::new(), Vec::new()));
        };
        self.deliver_notices(conn, registry, out)?;
        self.sweep_rows(conn, registry)
    }

    fn deliver_notices(
        &self,
        conn: &Connection,
        registry: i64,
        out: &crate::output::Output,
    ) -> Result<()> {
        type NoticeRow = (i64, String, String, String, String, String, Option<String>);
        let pending: Vec<NoticeRow> = {
            let mut stmt =
                conn.prepare_cached(include_str!("../../sql/agent_notices_pending.sql"))?;
            let rows = stmt.query_map((registry, self.caller()), |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                ))
            })?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        for (id, thread_id, kind, body, created_at, path, state) in pending {
            if self.notices_held(&thread_id) {
                continue; // a request of this serve is about to report on it
            }
            if self.consume(id)? {
                let _ = out.send(json!({"method": "notice", "params": {
                    "threadId": thread_id, "path": path, "kind": kind, "state": state,
                    "messageId": format!("agent-mailbox-{id}"), "text": body, "createdAt": created_at,
                    "recipient": self.caller(),
                }}));
            }
        }
        Ok(())
    }

    /// Threads this serve holds that have steering to deliver, and settled ones to retire.
    fn sweep_rows(&self, conn: &Connection, registry: i64) -> Result<(Vec<String>, Vec<String>)> {
        let me = self.rt.owner();
        let steer_ids: Vec<String> = {
            let mut stmt =
                conn.prepare_cached(include_str!("../../sql/agent_owned_pending_steers.sql"))?;
            let rows = stmt.query_map((registry, me.pid, me.started_at), |r| r.get(0))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let owned: Vec<(String, Option<String>)> = {
            let mut stmt = conn.prepare_cached(include_str!("../../sql/agent_owned_live.sql"))?;
            let rows = stmt.query_map((registry, me.pid, me.started_at), |r| {
                Ok((r.get(0)?, r.get(1)?))
            })?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        let settled = owned
            .into_iter()
            .filter(|(_, state)| !matches!(state.as_deref(), Some("starting" | "running")))
            .map(|(id, _)| id)
            .collect();
        Ok((steer_ids, settled))
    }

    /// Delivers steering to, or retires, the threads [`AgentHost::rows_changed`] returned.
    pub(crate) async fn sweep(self: &Arc<Self>, steer_ids: Vec<String>, settled: Vec<String>) {
        for id in steer_ids {
            let host = self.clone();
            tokio::spawn(async move {
                if let Err(e) = host.deliver(&id).await {
                    tracing::error!("delivering steering to {id} failed: {e}");
                }
            });
        }
        for id in settled {
            if let Err(e) = self.retire_if_done(&id).await {
                tracing::error!("retiring {id} failed: {e}");
            }
        }
    }
}

/// True when `file` holds a user message with exactly `text` written at or after `since`:
/// the child consumed that steering message.
fn user_message_since(file: &crate::pi::session::SessionFile, text: &str, since: &str) -> bool {
    file.entries.iter().rev().any(|e| {
        e["type"] == "message"
            && e["message"]["role"] == "user"
            && e["timestamp"].as_str().is_some_and(|t| t >= since)
            && message_text(&e["message"]["content"]) == text
    })
}

fn message_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}
