//! Starting a child: the spawn in its own process group, the row that says live, the tasks
//! that serve its pipes, and the first `get_state`/prompt. A launch is reserved before the
//! thread's row is inserted ([`Runtime::reserve_launch`]), so a call arriving before the spawn
//! waits for the child instead of finding the thread closed.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

use super::child::{read_stderr, read_stdout, write_stdin, Child, ChildView};
use super::mapping::{Phase, Tracker};
use super::rpc::{CallError, RpcClient};
use super::signals::{self, GroupSignal};
use super::stop::{close_row, wait_closed, wait_exit, ExitRecord};
use super::timers::run_timers;
use super::{Runtime, LOG_TARGET};
use crate::domain::{ExitKind, ThreadId};
use crate::error::{Error, Result};
use crate::store::events::{self, NewEvent};
use crate::store::{lifecycle, output};
use crate::time::now_iso;

/// How long a launch waits for the child to answer its initial prompt before returning.
pub const PROMPT_ANSWER_WAIT: Duration = Duration::from_millis(4_000);
/// How long a launch with a prompt waits for the child's answer to the `get_state` written
/// before that prompt (pi-threads' quick RPC timeout). The prompt is written after it either
/// way; a later answer still comes first in the child's stream and is recorded then.
const LAUNCH_STATE_WAIT: Duration = Duration::from_millis(1_500);
/// The note of a launch whose child exited before it answered its first command.
pub const EXITED_EARLY_NOTE: &str = "The child exited before it answered; its exit and stderr tail are in poll (detail \"full\"). Repair: check that THREADBASE_PI_COMMAND (a JSON array, default [\"pi\"]) starts Pi, which the engine runs in RPC mode.";
/// How long a launch whose child exited at once waits for that exit to be recorded, so the
/// result shows the closed row rather than a live one.
const EARLY_EXIT_RECORD_WAIT: Duration = Duration::from_millis(2_000);

/// How a launch begins.
#[derive(Debug, Clone)]
pub enum StartKind {
    /// A new thread: the prompt is sent verbatim.
    Prompt(String),
    /// A relaunch of a saved session: no prompt.
    Resumed,
    /// A new thread on a branched session file: no prompt.
    Forked {
        source_session_file: String,
        source_entry_id: Option<String>,
    },
}

/// Everything needed to launch one thread's process. The thread's row must exist.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    pub thread_id: ThreadId,
    /// Program and arguments.
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// Environment for the child, on top of this process's own unless `clear_env`.
    pub env: Vec<(String, String)>,
    /// Start the child from an empty environment (plus `env`).
    pub clear_env: bool,
    pub start: StartKind,
}

/// What a launch reports back.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchOutcome {
    pub pid: i64,
    /// `Some(true)` accepted, `Some(false)` rejected, `None` not answered yet (or no prompt).
    pub prompt_accepted: Option<bool>,
    pub note: Option<String>,
}

impl Runtime {
    /// Marks a launch of `thread_id` as under way, from before its row says live until its
    /// child is registered (or the returned guard drops, for a launch that failed). A thread is `starting` as soon as its row exists, but its child is
    /// known here only once spawned: [`Runtime::await_launch`] bridges that gap, so a send or
    /// wait arriving meanwhile finds the child instead of taking the thread for closed.
    pub fn reserve_launch(&self, thread_id: &ThreadId) -> LaunchReservation {
        self.inner
            .launching
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(thread_id.clone());
        LaunchReservation {
            rt: self.clone(),
            thread_id: thread_id.clone(),
        }
    }

    /// Waits (at most `limit`) while a reserved launch of the thread has not registered its
    /// child yet. Returns at once when there is no such launch.
    pub async fn await_launch(&self, thread_id: &ThreadId, limit: Duration) {
        let mut changes = self.inner.launches.subscribe();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let reserved = self
                .inner
                .launching
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(thread_id);
            if !reserved || self.child(thread_id).is_some() {
                return;
            }
            if tokio::time::timeout_at(deadline, changes.changed())
                .await
                .is_err()
            {
                return;
            }
        }
    }

    /// Starts a thread's process. The row must exist; on a spawn failure it is closed with a
    /// `failed` exit and the error says how to repair the command.
    pub async fn launch(&self, spec: LaunchSpec) -> Result<LaunchOutcome> {
        if self.is_live(&spec.thread_id) {
            return Err(Error::conflict(format!(
                "Thread {} already has a live process. Repair: stop it first, or send to it.",
                spec.thread_id
            )));
        }
        let Some((program, args)) = spec.argv.split_first() else {
            return Err(Error::invalid("The child command is empty. Repair: set THREADBASE_PI_COMMAND to a JSON array such as [\"pi\"]."));
        };
        let mut cmd = tokio::process::Command::new(program);
        if spec.clear_env {
            cmd.env_clear();
        }
        cmd.args(args)
            .current_dir(&spec.cwd)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(false);
        let thread_id: Arc<ThreadId> = Arc::new(spec.thread_id.clone());
        let mut proc = match cmd.spawn() {
            Ok(p) => p,
            // A cwd that is not a folder fails the spawn with ENOENT too, which would read as
            // a missing program: said as what it is (issue 46).
            Err(e) if !spec.cwd.is_dir() => {
                let message = format!(
                    "Failed to start child Pi: its cwd {} is not a folder on this host ({e})",
                    spec.cwd.display()
                );
                self.record_spawn_failure(&thread_id, &message).await?;
                return Err(Error::io(format!(
                    "{message}. Repair: create the folder (or restore it), or give the thread a cwd that exists."
                )));
            }
            Err(e) => {
                let message = format!("Failed to start child Pi ({program}): {e}");
                self.record_spawn_failure(&thread_id, &message).await?;
                return Err(Error::io(format!(
                    "{message}. Repair: check that THREADBASE_PI_COMMAND (a JSON array, default [\"pi\"]) names an installed program and that the cwd exists."
                )));
            }
        };
        let pid = proc.id().map(i64::from).unwrap_or(0);
        let started = signals::start_time(pid);
        let owner = self.inner.owner;
        let (event_kind, event_data) = match &spec.start {
            StartKind::Prompt(_) => ("thread_started", json!({"pid": pid})),
            StartKind::Resumed => ("thread_resumed", json!({"pid": pid})),
            StartKind::Forked {
                source_session_file,
                source_entry_id,
            } => (
                "thread_forked",
                json!({"pid": pid, "sourceSessionFile": source_session_file, "sourceEntryId": source_entry_id}),
            ),
        };
        let tid = thread_id.clone();
        let stall_ms = self.inner.config.stall.map(|d| d.as_millis() as i64);
        let launch_seq = self
            .inner
            .ingest
            .write(move |tx| {
                let launch = lifecycle::Launched {
                    pid,
                    started,
                    owner_pid: owner.pid,
                    owner_started: owner.started_at,
                    at: now_iso(),
                    stall_ms,
                };
                let seq = lifecycle::launched(tx, &tid, &launch)?.ok_or_else(|| {
                        Error::internal(format!(
                            "launch of unknown thread {tid}. Repair: the thread row was removed while it started; list the threads and start it again."
                        ))
                    })?;
                output::ensure(tx, &tid)?;
                let data = event_data.to_string();
                events::append(
                    tx,
                    &tid,
                    &[NewEvent {
                        at: &now_iso(),
                        kind: event_kind,
                        data: &data,
                    }],
                )?;
                Ok(seq)
            })
            .await;
        let launch_seq = match launch_seq {
            Ok(s) => s,
            Err(e) => {
                signals::signal_group(pid, GroupSignal::Kill);
                let _ = proc.wait().await;
                return Err(e);
            }
        };

        let (stdin_tx, stdin_rx) = mpsc::channel::<Vec<u8>>(256);
        let (view_tx, _) = watch::channel(ChildView {
            phase: Phase::Starting,
            closed: false,
            idle_since: None,
            settles: 0,
            asking: false,
        });
        let child = Arc::new(Child {
            thread_id: thread_id.clone(),
            pgid: pid,
            launch_seq,
            rpc: RpcClient::new(stdin_tx),
            tracker: Mutex::new(Tracker {
                ask_parent: self.ui_parent().is_some(),
                ..match spec.start {
                    StartKind::Prompt(_) => Tracker::new(),
                    StartKind::Resumed | StartKind::Forked { .. } => Tracker::without_prompt(),
                }
            }),
            view: view_tx,
            stop_requested: AtomicBool::new(false),
            quiet_close: AtomicBool::new(false),
            stop_note: Mutex::new(None),
            partial: Mutex::new((String::new(), None)),
            prompt_gate: Arc::default(),
            stop_reason: Default::default(),
            stall_told: Default::default(),
        });
        // The launch prompt holds the gate before anyone can see the child, so nothing (an
        // abort, a send) is written ahead of it.
        let mut launch_gate = match spec.start {
            StartKind::Prompt(_) => child.prompt_gate.clone().try_lock_owned().ok(),
            StartKind::Resumed | StartKind::Forked { .. } => None,
        };
        self.inner
            .children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(spec.thread_id.clone(), child.clone());
        // The reservation has served its purpose: from now on the child itself is known.
        self.inner
            .launching
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&spec.thread_id);
        self.inner.launches.send_modify(|n| *n += 1);

        let stdin = proc.stdin.take().expect("piped stdin");
        let stdout = proc.stdout.take().expect("piped stdout");
        let stderr = proc.stderr.take().expect("piped stderr");
        let span = tracing::info_span!(target: LOG_TARGET, "child", thread = %thread_id, pid);
        tracing::info!(target: LOG_TARGET, parent: &span, program = %program, cwd = %spec.cwd.display(), "child started");
        tokio::spawn(write_stdin(stdin, stdin_rx).instrument(span.clone()));
        let out_task =
            tokio::spawn(read_stdout(self.clone(), child.clone(), stdout).instrument(span.clone()));
        let err_task = tokio::spawn(
            read_stderr(self.inner.ingest.clone(), thread_id.clone(), stderr)
                .instrument(span.clone()),
        );
        tokio::spawn(
            wait_exit(self.clone(), child.clone(), proc, out_task, err_task)
                .instrument(span.clone()),
        );
        tokio::spawn(run_timers(self.clone(), child.clone()).instrument(span));

        let mut outcome = LaunchOutcome {
            pid,
            prompt_accepted: None,
            note: None,
        };
        match spec.start {
            StartKind::Prompt(text) => {
                // Like pi-threads' launch, ask the child's state before its first prompt: Pi
                // answers get_state at once (with `--name`'s sessionName and pendingMessageCount
                // 0), and the reader records that answer, so even a child that exits right
                // after its prompt leaves its session's name and pending count. The launch
                // still holds the prompt gate, so nothing else is written meanwhile; any
                // outcome (no answer in time, the child already gone) goes on to the prompt,
                // whose own answer decides the launch's note.
                let _ = child
                    .rpc
                    .call("get_state", json!({}), LAUNCH_STATE_WAIT)
                    .await;
                let answer = child
                    .start_prompt(json!({"message": text}), launch_gate.take())
                    .answer;
                match tokio::time::timeout(PROMPT_ANSWER_WAIT, answer).await {
                    Ok(Ok(Ok(resp))) => {
                        outcome.prompt_accepted = Some(resp.success);
                        if !resp.success {
                            outcome.note = Some(resp.error.unwrap_or_else(|| "Message was rejected by child Pi.".into()));
                        }
                    }
                    Ok(_) => {
                        outcome.note = Some(EXITED_EARLY_NOTE.into());
                        wait_closed(&mut child.view.subscribe(), EARLY_EXIT_RECORD_WAIT).await;
                    }
                    Err(_) => {
                        outcome.note = Some(format!(
                            "The child has not answered the prompt within {} ms; it stays starting until it does. Poll or wait before retrying.",
                            PROMPT_ANSWER_WAIT.as_millis()
                        ))
                    }
                }
            }
            StartKind::Resumed | StartKind::Forked { .. } => {
                // Pi sends nothing after a launch without a prompt; its answer to this
                // get_state, applied by the reader like any refresh, makes the thread idle
                // (for the tracker as much as for observers, so later refreshes read idle).
                let answer = child
                    .rpc
                    .call("get_state", json!({}), PROMPT_ANSWER_WAIT)
                    .await;
                match answer {
                    Ok(_) => {}
                    Err(CallError::Closed) => {
                        // Exited at once: report the recorded exit, not an idle live thread.
                        outcome.note = Some(EXITED_EARLY_NOTE.into());
                        wait_closed(&mut child.view.subscribe(), EARLY_EXIT_RECORD_WAIT).await;
                    }
                    Err(CallError::Timeout) => {
                        outcome.note = Some(format!(
                            "The child has not answered within {} ms; it stays starting until it does. Poll or wait before sending.",
                            PROMPT_ANSWER_WAIT.as_millis()
                        ))
                    }
                }
            }
        }
        Ok(outcome)
    }

    async fn record_spawn_failure(&self, thread_id: &Arc<ThreadId>, message: &str) -> Result<()> {
        let tid = thread_id.clone();
        let exit = ExitRecord {
            kind: ExitKind::Failed,
            code: None,
            signal: None,
            message: Some(message.to_string()),
            synthetic: false,
        };
        self.inner
            .ingest
            .write(move |tx| {
                let Some(seq) = lifecycle::launch_seq(tx, &tid)? else {
                    return Ok(());
                };
                lifecycle::reopen_for_failure(tx, &tid)?;
                close_row(tx, &tid, seq, &exit, false)?;
                Ok(())
            })
            .await
    }
}

/// A launch under way ([`Runtime::reserve_launch`]); dropping it ends the reservation.
pub struct LaunchReservation {
    rt: Runtime,
    thread_id: ThreadId,
}

impl Drop for LaunchReservation {
    fn drop(&mut self) {
        self.rt
            .inner
            .launching
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.thread_id);
        self.rt.inner.launches.send_modify(|n| *n += 1);
    }
}
