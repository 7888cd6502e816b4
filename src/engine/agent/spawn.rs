//! `agent_spawn`: every check and the thread's reservation in one transaction, then its
//! session file (a frozen snapshot of the parent's branch) and its first run.

use crate::domain::{ManagerId, SessionId, ThreadId};
use crate::engine::Reply;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::{view, Agents, Engine};
use crate::contract::agent::{self as contract, AgentState};
use crate::error::{Error, ErrorCode, Result};
use crate::paths::{self, ROOT};
use crate::store::agents::{self, AgentRow};
use crate::store::launches;
use crate::store::threads::{insert_thread, NewThread};
use crate::time::now_iso;

impl Agents<'_> {
    /// A reserved thread whose process never started is closed as failed, so no live row
    /// claims a process that never existed.
    fn close_unlaunched(&self, id: &ThreadId, message: &str) -> Result<()> {
        self.store
            .write(|tx| launches::close_unlaunched(tx, id, message).map(drop))
    }

    /// The root conversation's session file, if the registry knows one.
    pub(super) fn root_session_file(&self) -> Result<Option<PathBuf>> {
        let conn = self.store.read()?;
        let registry = self.registry()?;
        let file = agents::registry_session_file(&conn, registry)?;
        Ok(file.map(PathBuf::from))
    }

    /// Creates the child's session file: a frozen snapshot of its lexical parent's branch
    /// (nothing for an independent root), linked to the parent's file.
    pub(super) fn write_child_session(
        &self,
        id: &ThreadId,
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
        let session_id = SessionId::new(crate::pi::session::uuid_v7());
        let file = dir.join(crate::pi::session::session_file_name(
            &now_iso(),
            session_id.as_str(),
        ));
        let link = parent_file.filter(|f| f.exists());
        // The child's own cwd (its worktree's, when it is isolated).
        let cwd = PathBuf::from(self.row_by_id(id)?.cwd);
        crate::pi::session::write_subagent_session(
            inherit_from.as_ref(),
            &file,
            session_id.as_str(),
            &cwd,
            link.as_deref(),
            name,
            json!({"rootId": self.cfg.root_session_id, "threadPath": path}),
        )?;
        self.store.write(|tx| {
            launches::set_session_file(tx, id, &file.display().to_string(), &session_id)
        })?;
        Ok(file)
    }

    /// The queue's launch of contract B's claimed row `id` (`engine/queue.rs`): its session
    /// file (a snapshot of its parent's branch, as at a spawn) and its first run with its
    /// task. A launch that fails settles it as failed.
    pub(in crate::engine) async fn launch_queued(
        &self,
        registry: ManagerId,
        id: &ThreadId,
    ) -> Result<()> {
        let _launching = self.rt.reserve_launch(id);
        if crate::store::queue::state(&self.store.read()?, id)?
            != crate::store::queue::QueueState::Claimed
        {
            return Ok(());
        }
        let row = self.row_by_id(id)?;
        let parent_row = match row.parent_path.as_deref() {
            Some(p) if p != ROOT => agents::thread_at_path(&self.store.read()?, registry, p)?,
            _ => None,
        };
        let started = async {
            let file = self.write_child_session(id, &row.path, &row.name, parent_row.as_ref())?;
            self.launch_run(id, row.task.clone(), Some(file)).await?;
            Ok::<_, Error>(())
        }
        .await;
        if let Err(e) = started {
            self.store.write(|tx| {
                crate::store::launches::close_unlaunched(tx, id, &e.message).map(drop)
            })?;
            self.settle_run(id, AgentState::Failed, None, Some(e.message.clone()))?;
            return Err(e);
        }
        Ok(())
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
}

pub(in crate::engine) async fn spawn(e: &Engine, req: contract::Spawn) -> Result<Reply> {
    let e = &Agents(e);
    let registry = e.registry()?;
    let contract::Spawn {
        path,
        task,
        kind,
        wait,
        timeout_ms,
    } = req;
    let (path, kind) = (path.as_str(), kind.as_str());
    let root = e.caller_is_root();
    if !root {
        let me = e.own_row(registry)?;
        if !me.active() || me.stop_requested {
            return Err(Error::forbidden(format!(
                "Only a working agent may spawn children. Repair: {} is {}; spawn from a running agent, or ask the parent to resume this one.",
                me.path,
                if me.stop_requested { "stopping" } else { me.state.as_str() }
            )));
        }
    }
    let path = paths::resolve_agent_path(path, e.caller())?;
    e.check_access(&path, false)?;
    // 0.19: an invalid requiredChildExtensions entry stops every spawn.
    e.check_required_extensions()?;
    let parent = paths::parent_path(&path).map(str::to_string);
    // The child's model, thinking level and tools (a type whose models are all unavailable
    // fails the spawn here, before anything is reserved).
    let parent_now = match parent.as_deref() {
        Some(p) if p != ROOT => {
            let conn = e.store.read()?;
            agents::thread_at_path(&conn, registry, p)?
        }
        _ => None,
    };
    let choice = e.choose_run(kind, parent_now.as_ref()).await?;
    let id = crate::ids::new_thread_id();
    let level = paths::agent_level(&path);
    let owner = e.run_owner();
    // Issue 48: THREADBASE_ISOLATION=worktree, or a type with "isolation": "worktree", runs
    // the child in a git worktree of its own.
    let isolated = e.cfg.settings.isolation
        || e.cfg
            .agent_settings
            .types
            .get(kind)
            .is_some_and(|t| t.worktree);
    let isolation = crate::engine::isolation::prepare(isolated, &e.cfg.cwd)?;
    // Its result says why it runs without a worktree (`isolationNote`).
    let note = isolation.note();
    let plan = isolation.plan(&id, paths::basename(&path));
    let cwd = plan
        .as_ref()
        .map_or(e.cfg.cwd.clone(), |p| p.cwd.clone())
        .display()
        .to_string();
    let name = format!("{kind} {path}");
    // From the insert on, the thread is starting: a stop meanwhile waits for its child.
    let _launching = e.rt.reserve_launch(&id);
    let parent_row = e.store.write(|tx| {
        if let Some(old) = agents::thread_at_path(tx, registry, &path)? {
            if old.reaped_at.is_some() {
                // The path of a reaped thread stays taken by its row.
                return Err(Error::conflict(format!(
                    "Thread {path} was reaped; its path stays taken. Repair: spawn at a new path (its row, usage and session file are kept: threadbase sql \"SELECT * FROM threads WHERE path = '{path}'\")."
                )));
            }
            return Err(Error::conflict(format!(
                "Thread {path} already exists; use agent_steer to resume it. Repair: call agent_steer with this path, or pick a new path."
            )));
        }
        let parent_row = match parent.as_deref() {
            Some(p) if p != ROOT => Some(agents::thread_at_path(tx, registry, p)?.filter(|r| r.reaped_at.is_none()).ok_or_else(|| {
                Error::new(
                    ErrorCode::UnknownReference,
                    format!("Unknown thread {p}. Repair: a nested parent must already exist; spawn {p} first, or choose a path under an existing thread."),
                )
            })?),
            _ => None,
        };
        if !root && parent.as_deref() != Some(e.caller()) {
            return Err(Error::forbidden(format!(
                "An agent may spawn only its immediate children. Repair: spawn \"{}/<name>\" (or just \"<name>\").",
                e.caller()
            )));
        }
        if task.trim().is_empty() {
            return Err(Error::invalid(
                "Task must not be empty. Repair: describe the task the child should do.",
            ));
        }
        if level > e.cfg.settings.agent_limits.max_levels {
            return Err(Error::new(
                ErrorCode::Limit,
                format!(
                    "Agent depth limit reached. Repair: {path} would be level {level} and the limit is {} (the main conversation is level 1); spawn at a shallower path, or raise PI_SUBAGENTS_MAX_LEVELS.",
                    e.cfg.settings.agent_limits.max_levels
                ),
            ));
        }
        let total = agents::count_all(tx, registry)?;
        if total >= e.cfg.settings.agent_limits.max_threads {
            return Err(Error::new(
                ErrorCode::Limit,
                format!(
                    "Total thread limit reached. Repair: {total} of {} threads are retained, completed ones included; resume an existing thread with agent_steer instead, or raise PI_SUBAGENTS_MAX_THREADS.",
                    e.cfg.settings.agent_limits.max_threads
                ),
            ));
        }
        // THREADBASE_QUEUE=1: over the concurrency limit (or behind threads already
        // waiting) the spawn is queued instead of refused.
        let max = e.cfg.settings.agent_limits.max_concurrent;
        let queued = e.cfg.settings.queue
            && crate::store::queue::Slots::Working.must_wait(tx, registry, max)?;
        if !queued {
            e.check_capacity(tx, registry)?;
        }
        e.check_agent_budget(tx, parent_row.as_ref().map(|r| &r.id), "agent_spawn")?;
        if let Some(p) = parent.as_deref() {
            e.check_no_stopped_ancestor(tx, registry, p)?;
        }
        insert_thread(
            tx,
            &NewThread {
                id: ThreadId::new(id.clone()),
                manager_id: registry,
                path: path.clone(),
                parent_path: parent.clone(),
                parent_id: parent_row.as_ref().map(|r| r.id.clone()),
                task_name: paths::basename(&path).to_string(),
                name: name.clone(),
                depth: (level - 1) as i64,
                cwd: cwd.clone(),
                args: Vec::new(),
                agent_state: Some(AgentState::Starting),
                prompt: Some(task.clone()),
                task: Some(task.clone()),
                ..Default::default()
            },
        )?;
        agents::set_new(
            tx,
            &agents::Lifecycle {
                id: &id,
                status: contract::STATUS_STARTING,
                owner,
                at: &now_iso(),
            },
        )?;
        if let Some(plan) = &plan {
            crate::engine::isolation::record(tx, &id, plan)?;
        }
        crate::store::agents::recap::set_detached(tx, &id, !wait)?;
        agents::set_run(
            tx,
            &id,
            &agents::RunChoice {
                model: choice.model.as_deref(),
                thinking: choice.thinking.as_deref(),
                tools: choice.tools.as_deref(),
            },
        )?;
        if queued {
            let at = now_iso();
            crate::store::queue::mark(tx, &id, &at)?;
            crate::store::queue::renumber_agents(tx, registry)?;
        }
        Ok((parent_row, queued))
    });
    let (parent_row, queued) = parent_row?;
    // The worktree is made now, queued or not: a queued row launches later in its cwd.
    if let Some(plan) = &plan {
        if let Err(err) = crate::engine::isolation::create(e, &id, plan) {
            e.close_unlaunched(&id, &err.message)?;
            e.settle_run(&id, AgentState::Failed, None, Some(err.message.clone()))?;
            e.supersede_notices(&id)?;
            return Err(err);
        }
    }
    if queued {
        // No slot: the row waits; a settled thread's slot launches it (`engine/queue.rs`). A
        // detached spawn answers now ("Queued (position N)"); a blocking one waits through
        // the queue and the run, as it waits for a run that started at once.
        if !wait {
            return noted(e.row_by_id(&id)?, note);
        }
        let _held = e.hold_notices(&id);
        let row = e.wait_settled(&id, None).await?;
        return e.reported_noted(row, note);
    }
    let _held = e.hold_notices(&id);
    let started = async {
        let file = e.write_child_session(&id, &path, &name, parent_row.as_ref())?;
        // What a detached spawn answers: the thread as its run starts, like the original
        // (its view is taken right after the run is started, before the prompt lands).
        let starting = e.row_by_id(&id)?;
        e.launch_run(&id, task.clone(), Some(file)).await?;
        Ok::<_, Error>(starting)
    }
    .await;
    let starting = match started {
        Ok(row) => row,
        Err(err) => {
            e.close_unlaunched(&id, &err.message)?;
            e.settle_run(&id, AgentState::Failed, None, Some(err.message.clone()))?;
            // The error is the tool result; its "failed" notice would repeat it.
            e.supersede_notices(&id)?;
            return Err(err);
        }
    };
    // The report-only timer: armed once the run is under way; it never bounds the wait.
    if let Some(ms) = timeout_ms {
        e.arm_timer(&id, ms)?;
    }
    if wait {
        let row = e.wait_settled(&id, None).await?;
        e.reported_noted(row, note)
    } else {
        noted(starting, note)
    }
}

/// [`answer_row`] of `row` with the isolation note, when there is one.
pub(super) fn noted(row: AgentRow, note: Option<String>) -> Result<Reply> {
    Ok(Reply::shaped(move |w| {
        let mut v = view(&row);
        v.isolation_note = note.as_deref();
        contract::tool_result(w, &v, false)
    }))
}
