//! A run's life in the serve that launched it: the launch, the move to running, each
//! settlement (recorded with its notice for the parent in one transaction), the end of the
//! process, its retirement once no descendant works, and this serve's shutdown.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::Agents;
use crate::contract::agent::{self as contract, AgentState};
use crate::contract::args as argpolicy;
use crate::domain::ThreadId;
use crate::engine::child_env::{ChildEnv, Parent};
use crate::error::{Error, ErrorCode, Result};
use crate::paths::{self, ROOT};
use crate::runtime::StopBy;
use crate::runtime::{LaunchSpec, StartKind};
use crate::store::agents::mailbox;
use crate::store::agents::{self, AgentRow};
use crate::time::now_iso;

impl Agents<'_> {
    /// Launches one run of a reserved thread with `prompt`, on its session file, and starts
    /// supervising it.
    pub(super) async fn launch_run(
        &self,
        id: &ThreadId,
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
        // A reopened run under `use-current` takes the main session's current model.
        let row = match self.reopened_choice(&row) {
            Some(c) => {
                self.record_choice(id, &c)?;
                self.row_by_id(id)?
            }
            None => row,
        };
        let inherited = self.run_args(
            &row,
            argpolicy::inherited_args(&self.cfg.parent_args, &self.cfg.cwd),
        );
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
                thread_id: id.clone(),
                argv,
                cwd,
                env: self.agent_child_env(&row),
                clear_env: false,
                start: StartKind::Prompt(prompt),
            })
            .await?;
        if outcome.prompt_accepted == Some(false) {
            let why = outcome
                .note
                .unwrap_or_else(|| "The child rejected the prompt.".into());
            let _ = self.rt.stop(id, false, StopBy::Caller).await;
            return Err(Error::io(format!(
                "{} could not start its run: {why} Repair: check the child's model and credentials, then agent_steer it to retry.",
                row.path
            )));
        }
        if outcome.prompt_accepted == Some(true) {
            self.mark_running(id)?;
        }
        self.supervise_run(id.clone());
        Ok(())
    }

    /// Records what a thread's runs are launched with on its row.
    pub(super) fn record_choice(&self, id: &ThreadId, c: &super::choose::Choice) -> Result<()> {
        self.store.write(|tx| {
            agents::set_run(
                tx,
                id,
                &agents::RunChoice {
                    model: c.model.as_deref(),
                    thinking: c.thinking.as_deref(),
                    tools: c.tools.as_deref(),
                },
            )
        })
    }

    fn agent_child_env(&self, row: &AgentRow) -> Vec<(String, String)> {
        let parent = Parent::Thread {
            path: row.parent_path.as_deref().unwrap_or(ROOT),
            id: None,
        };
        ChildEnv::new(
            &self.cfg,
            Some(&row.id),
            &row.path,
            (paths::agent_level(&row.path) - 1) as i64,
            parent,
            &self.cfg.root_session_id,
        )
        .agent_limits(&self.cfg.settings.agent_limits)
        .into_vec()
    }

    fn mark_running(&self, id: &ThreadId) -> Result<()> {
        self.store
            .write(|tx| agents::mark_running(tx, id, contract::STATUS_WORKING, &now_iso()))
    }

    /// Records a settlement and its notice for the parent in one transaction. Returns false
    /// when the thread was not working (someone settled it first).
    pub(super) fn settle_run(
        &self,
        id: &ThreadId,
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
            let settled = agents::settle(
                tx,
                &agents::Settlement {
                    id,
                    state,
                    status: status.as_deref(),
                    output: output.as_deref(),
                    error: error.as_deref(),
                    at: &at,
                },
            )?;
            let Some(settled) = settled else {
                return Ok(false);
            };
            let status_text = settled.status_text.unwrap_or_default();
            let text =
                contract::settled_notice(&settled.path, state, &status_text, output.as_deref());
            let recipient = settled.parent_path.unwrap_or_else(|| ROOT.to_string());
            // A request of this serve holds the thread and returns this settlement itself: the
            // notice is written delivered, so another serve of the same caller cannot send it
            // before the request supersedes it (the hold is this process's alone).
            let quiet = recipient == self.caller() && self.notice_holds.is_held(id);
            let written = mailbox::insert(
                tx,
                &mailbox::NewMail {
                    thread_id: id,
                    direction: mailbox::Direction::ToParent,
                    kind: mailbox::MailKind::Notice,
                    send_key: &format!("settled:{}:{at}", settled.launch_seq),
                    message_id: None,
                    body: &text,
                    recipient: Some(recipient.as_str()),
                    at: &at,
                    delivered: quiet,
                },
            )?;
            self.recap_after_settle(tx, &recipient, written.filter(|_| !quiet), settled.detached)?;
            if let Some(row) = written.filter(|_| quiet) {
                self.notice_holds.quieted(id, row);
            }
            Ok(true)
        })
    }

    /// Follows one launched run: running when the child starts working, a settlement each
    /// time it goes idle, and the close of its process.
    fn supervise_run(&self, id: ThreadId) {
        let engine = self.arc();
        let Some(mut view) = self.rt.watch(&id) else {
            // The process ended while its launch ran (stopped or gone before it answered):
            // nothing else would record the end of this run, and a wait would never return.
            tokio::spawn(async move {
                if let Err(e) = Agents(&engine).on_closed(&id).await {
                    eprintln!("threadbase serve: recording the end of {id} failed: {e}");
                }
            });
            return;
        };
        tokio::spawn(async move {
            let agents = Agents(&engine);
            let mut handled = 0u64;
            let mut marked_running = false;
            loop {
                let v = view.borrow_and_update().clone();
                if v.closed {
                    break;
                }
                if !marked_running && v.phase == crate::runtime::mapping::Phase::Busy {
                    marked_running = agents.mark_running(&id).is_ok();
                }
                if v.settles > handled {
                    handled = v.settles;
                    marked_running = false;
                    if let Err(e) = agents.on_settled(&id).await {
                        tracing::error!("settling {id} failed: {e}");
                    }
                }
                if view.changed().await.is_err() {
                    break;
                }
            }
            if let Err(e) = agents.on_closed(&id).await {
                tracing::error!("recording the end of {id} failed: {e}");
            }
        });
    }

    async fn on_settled(&self, id: &ThreadId) -> Result<()> {
        let guard = self.locks.lock(id).await;
        let row = self.row_by_id(id)?;
        if row.active() && self.is_mine(&row) {
            // Confirm with the child that nothing is queued (a steer may have just arrived).
            match self.rt.refresh(id, Duration::from_secs(3)).await {
                Ok((true, _)) => {}
                Ok((false, _)) => return Ok(()),
                Err(_) => return Ok(()), // closed meanwhile: on_closed decides
            }
            let row = self.row_by_id(id)?;
            self.unconsumed_steers(&row)?;
            if row.stop_requested {
                self.settle_run(id, AgentState::Stopped, None, None)?;
            } else if row.pause_requested {
                self.settle_run(id, AgentState::Paused, None, None)?;
            } else if let Some(error) = self.run_error(id)? {
                self.settle_run(id, AgentState::Failed, None, Some(error))?;
            } else {
                let output = self.final_answer(id)?;
                self.settle_run(id, AgentState::Completed, Some(output), None)?;
            }
        }
        drop(guard);
        if !self.pending_steers(id)?.is_empty() {
            return self.deliver_steering(id).await;
        }
        self.retire_if_done(id).await
    }

    /// The final assistant text of the run.
    fn final_answer(&self, id: &ThreadId) -> Result<String> {
        let conn = self.store.read()?;
        Ok(crate::store::output::of_thread(&conn, id)?
            .last_assistant_text
            .unwrap_or_default())
    }

    /// The model error the run ended with, if its last message was one.
    fn run_error(&self, id: &ThreadId) -> Result<Option<String>> {
        let conn = self.store.read()?;
        Ok(match agents::last_outcome(&conn, id)? {
            Some(last) if last.kind == "thread_error" => {
                let v: Value = serde_json::from_str(&last.data).unwrap_or(Value::Null);
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

    async fn on_closed(&self, id: &ThreadId) -> Result<()> {
        let guard = self.locks.lock(id).await;
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
            return self.deliver_steering(id).await;
        }
        self.unconsumed_steers(&row)?;
        if row.stop_requested {
            self.settle_run(id, AgentState::Stopped, None, None)?;
        } else {
            let conn = self.store.read()?;
            let message = agents::exit_message(&conn, id)?;
            let error = message
                .unwrap_or_else(|| "The child Pi process ended before its run settled.".into());
            self.settle_run(id, AgentState::Failed, None, Some(error))?;
        }
        Ok(())
    }

    /// Ends a settled run's process once none of its descendants is working and no steer
    /// waits for it.
    pub(super) async fn retire_if_done(&self, id: &ThreadId) -> Result<()> {
        let row = self.row_by_id(id)?;
        if row.active() || !self.rt.is_live(id) {
            return Ok(());
        }
        if self.working_descendants(self.registry()?, &row.path)? > 0
            || !self.pending_steers(id)?.is_empty()
        {
            return Ok(());
        }
        let engine = self.arc();
        let id = id.clone();
        tokio::spawn(async move {
            let agents = Agents(&engine);
            let _guard = agents.locks.lock(&id).await;
            // Re-check under the lock: a steer may have reserved a new run meanwhile.
            if agents.row_by_id(&id).is_ok_and(|r| !r.active())
                && agents.pending_steers(&id).is_ok_and(|p| p.is_empty())
            {
                let _ = agents.rt.stop(&id, false, StopBy::Caller).await;
            }
        });
        Ok(())
    }

    /// Before this serve shuts down: its working threads will settle as stopped.
    pub fn before_shutdown(&self) {
        let registry = self.agent.registry();
        let owned = self
            .store
            .read()
            .and_then(|conn| agents::owned_live(&conn, registry, self.run_owner()));
        for t in owned.unwrap_or_default() {
            if t.active {
                let _ = self.store.write(|tx| {
                    agents::request_stop(tx, &t.id, contract::STATUS_STOPPING, &now_iso())
                });
            }
        }
    }

    /// After this serve's children are stopped: its working threads settle as stopped now,
    /// while the process still runs (their supervisors may not get to it).
    pub fn after_shutdown(&self) {
        let registry = self.agent.registry();
        let ids = self
            .store
            .read()
            .and_then(|conn| agents::owned_active(&conn, registry, self.run_owner()));
        for id in ids.unwrap_or_default() {
            if let Err(e) = self.settle_run(&id, AgentState::Stopped, None, None) {
                tracing::error!("recording the stop of {id} failed: {e}");
            }
        }
    }
}
