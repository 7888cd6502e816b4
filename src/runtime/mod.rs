//! The runtime: supervises child Pi processes (`pi --mode rpc`) and records everything they
//! do as rows. It is thin on purpose: each child runs in its own process group with one task
//! per pipe and one waiting for its exit; events go through the batching [`ingest`] writer;
//! the runtime never holds the only copy of a fact.
//!
//! - [`process`]: process identity (pid + start time) and group signals.
//! - [`rpc`]: the RPC codec and line framing.
//! - [`mapping`]: Pi events → lifecycle events and phases.
//! - [`ingest`]: the batching writer.
//! - [`restore`]: the crash-restore pass.

pub mod ingest;
pub mod mapping;
pub mod process;
pub mod restore;
pub mod rpc;

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rusqlite::{named_params, OptionalExtension, Transaction};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};
use tracing::Instrument;

use crate::error::{Error, ErrorCode, Result};
use crate::store::events::{self, NewEvent};
use crate::store::Store;
use crate::time::now_iso;
use ingest::{Ingest, IngestOp};
use mapping::{Effect, Phase, Tracker};
use process::{GroupSignal, ProcessIdentity};
use rpc::{CallError, Line, RpcClient};

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
/// A close that failed with an I/O error (a full disk) is retried this often, this many times.
const CLOSE_RETRY_EVERY: Duration = Duration::from_secs(1);
const CLOSE_RETRIES: u32 = 600;
/// How long a call for a thread whose launch is under way waits for its child to be spawned
/// (see [`Runtime::reserve_launch`]).
pub const LAUNCH_WAIT: Duration = Duration::from_secs(10);
/// RPC timeout of a send (from the moment it is written).
pub const SEND_TIMEOUT: Duration = Duration::from_millis(5_000);
/// How long a send or abort waits for the child to answer an earlier prompt before it is
/// written (a child still booting answers its launch prompt only when it is up).
pub const PROMPT_GATE_WAIT: Duration = Duration::from_secs(30);
/// Graceful stop: abort timeout, then the wait after SIGTERM, then after SIGKILL.
pub const STOP_ABORT_TIMEOUT: Duration = Duration::from_millis(1_500);
pub const STOP_TERM_WAIT: Duration = Duration::from_millis(1_500);
pub const STOP_KILL_WAIT: Duration = Duration::from_millis(300);
/// Partial assistant text is written at most this often while streaming.
const PARTIAL_FLUSH: Duration = Duration::from_millis(25);
/// After the process exits, how long to wait for its pipes to drain (a grandchild may keep
/// them open).
const PIPE_DRAIN: Duration = Duration::from_millis(500);

/// Timers from the environment (`PI_THREADS_IDLE_CLEANUP_MS`, `PI_THREADS_LIVE_TIMEOUT_MS`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RuntimeConfig {
    /// Stop a child idle (nothing pending) this long. `None` disables.
    pub idle_cleanup: Option<Duration>,
    /// Stop a child this long after its launch. `None` disables.
    pub live_timeout: Option<Duration>,
}

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
    pub thread_id: String,
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

/// How a message is delivered to a live child.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SendMode {
    Prompt,
    Steer,
    FollowUp,
}

impl SendMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SendMode::Prompt => "prompt",
            SendMode::Steer => "steer",
            SendMode::FollowUp => "follow_up",
        }
    }
}

/// The child's answer to a send.
#[derive(Debug, Clone, PartialEq)]
pub struct SendOutcome {
    /// `true` accepted, `false` rejected, `None` no answer in time (it may still run).
    pub accepted: Option<bool>,
    pub error: Option<String>,
}

/// A live child as observers see it.
#[derive(Debug, Clone)]
pub struct ChildView {
    pub phase: Phase,
    pub closed: bool,
    /// When the current idle stretch began (child activity restarts it; polls do not).
    pub idle_since: Option<Instant>,
    /// How many times the child went idle after working or starting (runs settled). A counter,
    /// not a phase, so an observer that wakes late still sees every settlement.
    pub settles: u64,
}

/// How a process ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ExitRecord {
    pub kind: &'static str,
    pub code: Option<i64>,
    pub signal: Option<String>,
    pub message: Option<String>,
    pub synthetic: bool,
}

impl ExitRecord {
    /// How a child's close reads (pi-threads' `classifyProcessExit`): `stopped` after a stop
    /// request; `exited` for code 0 and no signal; otherwise `failed` with
    /// `Child Pi process exited with ` and the known parts of `code N` and `signal S` joined by
    /// `, ` (`unknown status` when neither is known).
    pub fn classify(code: Option<i64>, signal: Option<String>, stopped: bool) -> ExitRecord {
        let (kind, message) = if stopped {
            ("stopped", None)
        } else if code == Some(0) && signal.is_none() {
            ("exited", None)
        } else {
            let parts: Vec<String> = [
                code.map(|c| format!("code {c}")),
                signal.as_ref().map(|s| format!("signal {s}")),
            ]
            .into_iter()
            .flatten()
            .collect();
            let status = if parts.is_empty() {
                "unknown status".to_string()
            } else {
                parts.join(", ")
            };
            (
                "failed",
                Some(format!("Child Pi process exited with {status}")),
            )
        };
        ExitRecord {
            kind,
            code,
            signal,
            message,
            synthetic: false,
        }
    }

    /// The contract's `ThreadExit` JSON.
    pub fn to_json(&self) -> Value {
        match self.kind {
            "failed" | "stale" => json!({"kind": self.kind, "message": self.message}),
            _ => json!({"kind": self.kind, "code": self.code, "signal": self.signal}),
        }
    }

    /// The phase of a thread closed with this exit.
    pub fn closed_phase(&self) -> &'static str {
        match self.kind {
            "stale" => "stale",
            "failed" => "failed",
            "exited" if self.code != Some(0) || self.signal.is_some() => "failed",
            _ => "idle",
        }
    }
}

struct Child {
    thread_id: Arc<str>,
    pgid: i64,
    launch_seq: i64,
    rpc: RpcClient,
    tracker: Mutex<Tracker>,
    view: watch::Sender<ChildView>,
    stop_requested: AtomicBool,
    partial: Mutex<(String, Option<Instant>)>,
    /// Held from writing a `prompt` until its answer. Pi 1.6 checks whether it is busy only
    /// after a prompt's asynchronous preflight, so a second prompt written before the first is
    /// answered (a follow-up to a thread still starting, two concurrent sends) is also answered
    /// `started`, then silently dropped; its stray `agent_settled` and a reset `isStreaming`
    /// make the running thread look idle. One prompt in flight per child avoids all of it.
    prompt_gate: Arc<tokio::sync::Mutex<()>>,
}

struct Inner {
    store: Arc<Store>,
    ingest: Ingest,
    owner: ProcessIdentity,
    config: RuntimeConfig,
    children: Mutex<HashMap<String, Arc<Child>>>,
    /// Threads whose launch is under way (see [`Runtime::reserve_launch`]).
    launching: Mutex<std::collections::HashSet<String>>,
    /// Bumped when a child is registered or a launch reservation ends.
    launches: watch::Sender<u64>,
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
            }),
        }
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

    fn child(&self, thread_id: &str) -> Option<Arc<Child>> {
        self.inner
            .children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(thread_id)
            .cloned()
    }

    /// True when this runtime holds a live process for the thread.
    pub fn is_live(&self, thread_id: &str) -> bool {
        self.child(thread_id)
            .is_some_and(|c| !c.view.borrow().closed)
    }

    /// Ids of the threads with a live process here.
    pub fn live_ids(&self) -> Vec<String> {
        self.inner
            .children
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .cloned()
            .collect()
    }

    /// Marks a launch of `thread_id` as under way, from before its row says live until its
    /// child is registered (or the returned guard drops, for a launch that failed). A thread is `starting` as soon as its row exists, but its child is
    /// known here only once spawned: [`Runtime::await_launch`] bridges that gap, so a send or
    /// wait arriving meanwhile finds the child instead of taking the thread for closed.
    pub fn reserve_launch(&self, thread_id: &str) -> LaunchReservation {
        self.inner
            .launching
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(thread_id.to_string());
        LaunchReservation {
            rt: self.clone(),
            thread_id: thread_id.to_string(),
        }
    }

    /// Waits (at most `limit`) while a reserved launch of the thread has not registered its
    /// child yet. Returns at once when there is no such launch.
    pub async fn await_launch(&self, thread_id: &str, limit: Duration) {
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

    /// Watches a live child's phase and closure.
    pub fn watch(&self, thread_id: &str) -> Option<watch::Receiver<ChildView>> {
        self.child(thread_id).map(|c| c.view.subscribe())
    }

    /// Waits until everything recorded so far is committed.
    pub async fn flush(&self) {
        self.inner.ingest.flush().await
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
        let thread_id: Arc<str> = Arc::from(spec.thread_id.as_str());
        let mut proc = match cmd.spawn() {
            Ok(p) => p,
            Err(e) => {
                let message = format!("Failed to start child Pi ({program}): {e}");
                self.record_spawn_failure(&thread_id, &message).await?;
                return Err(Error::io(format!(
                    "{message}. Repair: check that THREADBASE_PI_COMMAND (a JSON array, default [\"pi\"]) names an installed program and that the cwd exists."
                )));
            }
        };
        let pid = proc.id().map(i64::from).unwrap_or(0);
        let started = process::start_time(pid);
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
        let launch_seq = self
            .inner
            .ingest
            .write(move |tx| {
                let mut stmt = tx.prepare_cached(include_str!("../../sql/thread_launched.sql"))?;
                let seq: i64 = stmt
                    .query_row(
                        named_params! {
                            ":pid": pid, ":pgid": pid, ":started": started,
                            ":owner_pid": owner.pid, ":owner_started": owner.started_at,
                            ":now": now_iso(), ":id": &*tid,
                        },
                        |r| r.get(0),
                    )
                    .optional()?
                    .ok_or_else(|| {
                        Error::internal(format!(
                            "launch of unknown thread {tid}. Repair: the thread row was removed while it started; list the threads and start it again."
                        ))
                    })?;
                tx.prepare_cached(include_str!("../../sql/output_ensure.sql"))?
                    .execute([&*tid])?;
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
                process::signal_group(pid, GroupSignal::Kill);
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
        });
        let child = Arc::new(Child {
            thread_id: thread_id.clone(),
            pgid: pid,
            launch_seq,
            rpc: RpcClient::new(stdin_tx),
            tracker: Mutex::new(match spec.start {
                StartKind::Prompt(_) => Tracker::new(),
                StartKind::Resumed | StartKind::Forked { .. } => Tracker::without_prompt(),
            }),
            view: view_tx,
            stop_requested: AtomicBool::new(false),
            partial: Mutex::new((String::new(), None)),
            prompt_gate: Arc::default(),
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
        let span = tracing::info_span!("child", thread = %thread_id, pid);
        tracing::info!(parent: &span, program = %program, cwd = %spec.cwd.display(), "child started");
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

    async fn record_spawn_failure(&self, thread_id: &Arc<str>, message: &str) -> Result<()> {
        let tid = thread_id.clone();
        let exit = ExitRecord {
            kind: "failed",
            code: None,
            signal: None,
            message: Some(message.to_string()),
            synthetic: false,
        };
        self.inner
            .ingest
            .write(move |tx| {
                let seq: Option<i64> = tx
                    .prepare_cached(include_str!("../../sql/thread_launch_seq.sql"))?
                    .query_row([&*tid], |r| r.get(0))
                    .optional()?;
                let Some(seq) = seq else { return Ok(()) };
                tx.prepare_cached(include_str!("../../sql/thread_reopen_for_failure.sql"))?
                    .execute([&*tid])?;
                close_row(tx, &tid, seq, &exit)?;
                Ok(())
            })
            .await
    }

    /// Sends a message to a live child (`prompt`, or `prompt` with a streaming behaviour).
    pub async fn send(
        &self,
        thread_id: &str,
        mode: SendMode,
        message: &str,
    ) -> Result<SendOutcome> {
        let child = self.live_child(thread_id)?;
        let mut fields = json!({"message": message});
        match mode {
            SendMode::Prompt => {}
            SendMode::Steer => fields["streamingBehavior"] = json!("steer"),
            SendMode::FollowUp => fields["streamingBehavior"] = json!("followUp"),
        }
        let mut prompt = child.start_prompt(fields, None);
        let written = match tokio::time::timeout(PROMPT_GATE_WAIT, &mut prompt.written).await {
            Ok(r) => r.is_ok(),
            Err(_) => {
                // Closed first, so the prompt is either written already or never will be.
                prompt.written.close();
                prompt.written.try_recv().is_ok()
            }
        };
        if !written {
            return Ok(SendOutcome {
                accepted: Some(false),
                error: Some(format!(
                    "Not sent: the child has not answered an earlier message for {} s, and a message written before that answer would be lost. Nothing was written. Repair: poll or wait, then send {} again.",
                    PROMPT_GATE_WAIT.as_secs(),
                    mode.as_str()
                )),
            });
        }
        let answer = match tokio::time::timeout(SEND_TIMEOUT, prompt.answer).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(CallError::Closed),
            Err(_) => Err(CallError::Timeout),
        };
        Ok(match answer {
            Ok(resp) if resp.success => SendOutcome { accepted: Some(true), error: None },
            Ok(resp) => SendOutcome {
                accepted: Some(false),
                error: Some(resp.error.unwrap_or_else(|| "Message was rejected by child Pi.".into())),
            },
            Err(CallError::Timeout) => SendOutcome {
                accepted: None,
                error: Some(format!(
                    "Timed out waiting for RPC response to send {}. The request was written and may still be processed; poll or wait before retrying.",
                    mode.as_str()
                )),
            },
            Err(CallError::Closed) => SendOutcome { accepted: Some(false), error: Some("The child closed before answering.".into()) },
        })
    }

    /// Asks a live child for its state and updates the phase. Returns whether this refresh
    /// read idle with nothing pending, and the raw state.
    pub async fn refresh(&self, thread_id: &str, timeout: Duration) -> Result<(bool, Value)> {
        let child = self.live_child(thread_id)?;
        let resp = child.rpc.call("get_state", json!({}), timeout).await.map_err(|e| {
            Error::io(format!(
                "The child did not answer get_state ({e:?}). Repair: poll again; if it keeps failing, stop the thread."
            ))
        })?;
        // The reader applied the answer in stream order and says whether it read idle.
        Ok((resp.refreshed_idle.unwrap_or(false), resp.data))
    }

    /// Aborts a live child's run; `timeout` bounds the abort's answer. The `abort` is written
    /// once no prompt is unanswered (waiting at most [`PROMPT_GATE_WAIT`]): Pi 1.6 answers an
    /// abort that arrives during a prompt's preflight at once and then runs that prompt anyway
    /// (verified), so an interrupt of a thread still starting would be lost.
    pub async fn abort(&self, thread_id: &str, timeout: Duration) -> Result<rpc::Response> {
        let child = self.live_child(thread_id)?;
        abort_child(&child, PROMPT_GATE_WAIT, timeout).await.map_err(|e| {
            Error::io(format!(
                "The child did not answer abort ({e:?}). Repair: poll the thread; stop it if it keeps running."
            ))
        })
    }

    /// Sends an arbitrary RPC command to a live child (used by tests and forks).
    pub async fn call(
        &self,
        thread_id: &str,
        kind: &str,
        fields: Value,
        timeout: Duration,
    ) -> Result<rpc::Response> {
        let child = self.live_child(thread_id)?;
        child.rpc.call(kind, fields, timeout).await.map_err(|e| {
            Error::io(format!(
                "The child did not answer {kind} ({e:?}). Repair: poll the thread and retry."
            ))
        })
    }

    fn live_child(&self, thread_id: &str) -> Result<Arc<Child>> {
        match self.child(thread_id) {
            Some(c) if !c.view.borrow().closed => Ok(c),
            _ => Err(Error::new(
                ErrorCode::Closed,
                format!(
                    "Thread is closed: {thread_id} (its process ended while the request ran). Repair: poll the thread to see its exit, then resume it or start a new thread."
                ),
            )),
        }
    }

    /// Stops a live child: graceful (abort, SIGTERM to the group, SIGKILL) or `force`
    /// (SIGKILL at once). Returns false when it was not live here (a no-op).
    pub async fn stop(&self, thread_id: &str, force: bool) -> Result<bool> {
        self.await_launch(thread_id, LAUNCH_WAIT).await;
        let Some(child) = self.child(thread_id) else {
            return Ok(false);
        };
        if child.view.borrow().closed {
            return Ok(false);
        }
        let first = !child.stop_requested.swap(true, Ordering::SeqCst);
        if first {
            child
                .tracker
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .phase = Phase::Stopping;
            child.view.send_modify(|v| {
                v.phase = Phase::Stopping;
                v.idle_since = None;
            });
            let tid = child.thread_id.clone();
            self.inner
                .ingest
                .write(move |tx| {
                    tx.prepare_cached(include_str!("../../sql/thread_request_stop.sql"))?
                        .execute(named_params! {":at": now_iso(), ":id": &*tid})?;
                    events::append(
                        tx,
                        &tid,
                        &[NewEvent {
                            at: &now_iso(),
                            kind: "thread_stopping",
                            data: "{}",
                        }],
                    )?;
                    Ok(())
                })
                .await?;
        }
        let mut view = child.view.subscribe();
        if !force {
            // The process is signalled next anyway: the abort keeps its fixed budget.
            let _ = tokio::time::timeout(
                STOP_ABORT_TIMEOUT,
                abort_child(&child, STOP_ABORT_TIMEOUT, STOP_ABORT_TIMEOUT),
            )
            .await;
            process::signal_group(child.pgid, GroupSignal::Terminate);
            if wait_closed(&mut view, STOP_TERM_WAIT).await {
                return Ok(true);
            }
        }
        process::signal_group(child.pgid, GroupSignal::Kill);
        if wait_closed(&mut view, STOP_KILL_WAIT).await {
            return Ok(true);
        }
        // The process has not reported its exit: record a synthesized one; a late real exit
        // of this launch replaces it.
        let exit = ExitRecord {
            kind: "stopped",
            code: None,
            signal: Some("SIGKILL".into()),
            message: None,
            synthetic: true,
        };
        self.close(&child, exit).await;
        Ok(true)
    }

    /// Stops every live child gracefully, all at once, and flushes the writer.
    pub async fn shutdown(&self) {
        let mut stops = tokio::task::JoinSet::new();
        for id in self.live_ids() {
            let rt = self.clone();
            stops.spawn(async move { rt.stop(&id, false).await });
        }
        while let Some(r) = stops.join_next().await {
            if let Ok(Err(e)) = r {
                tracing::warn!("stop during shutdown failed: {e}");
            }
        }
        self.flush().await;
    }

    /// Records the effects of child events: rows through the writer, phases in the view,
    /// dialog cancellations to the child.
    async fn apply(&self, child: &Arc<Child>, effects: Vec<Effect>) {
        let ingest = &self.inner.ingest;
        let tid = &child.thread_id;
        for effect in effects {
            match effect {
                Effect::Event(kind, data) => {
                    child.view.send_modify(|v| {
                        if v.phase == Phase::Idle {
                            v.idle_since = Some(Instant::now());
                        }
                    });
                    ingest
                        .send(IngestOp::Event {
                            thread_id: tid.clone(),
                            at: now_iso(),
                            kind,
                            data: data.to_string(),
                        })
                        .await;
                }
                Effect::Phase(phase) => {
                    // Queue the row change before observers see the new phase, so a flush
                    // after seeing it always finds the row updated.
                    ingest
                        .send(IngestOp::Phase {
                            thread_id: tid.clone(),
                            at: now_iso(),
                            phase: phase.as_str(),
                        })
                        .await;
                    child.view.send_modify(|v| {
                        if v.phase != Phase::Stopping {
                            if phase == Phase::Idle && v.phase != Phase::Idle {
                                v.settles += 1;
                            }
                            v.idle_since = (phase == Phase::Idle).then(Instant::now);
                            v.phase = phase;
                        }
                    });
                }
                Effect::AssistantText(text) => {
                    child
                        .partial
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                        .clear();
                    ingest
                        .send(IngestOp::AssistantText {
                            thread_id: tid.clone(),
                            text,
                        })
                        .await;
                }
                Effect::PartialDelta(delta) => {
                    let snapshot = {
                        let mut p = child.partial.lock().unwrap_or_else(|p| p.into_inner());
                        if crate::text::utf16_len(&p.0) < mapping::RETAINED_TEXT_CHARS {
                            p.0.push_str(&delta);
                        }
                        let due = p.1.is_none_or(|t| t.elapsed() >= PARTIAL_FLUSH);
                        if due {
                            p.1 = Some(Instant::now());
                            Some(crate::text::retain(&p.0, mapping::RETAINED_TEXT_CHARS))
                        } else {
                            None
                        }
                    };
                    if let Some(text) = snapshot {
                        ingest
                            .send(IngestOp::PartialText {
                                thread_id: tid.clone(),
                                text,
                            })
                            .await;
                    }
                }
                Effect::TurnOpen(open) => {
                    ingest
                        .send(IngestOp::TurnOpen {
                            thread_id: tid.clone(),
                            open,
                        })
                        .await
                }
                Effect::SessionState { name, pending } => {
                    ingest
                        .send(IngestOp::SessionState {
                            thread_id: tid.clone(),
                            name,
                            pending,
                        })
                        .await
                }
                Effect::CancelUi(id) => {
                    child.rpc.notify(rpc::cancel_ui(&id)).await;
                }
                Effect::Usage(usage) => {
                    ingest
                        .send(IngestOp::Usage {
                            thread_id: tid.clone(),
                            at: now_iso(),
                            usage,
                        })
                        .await
                }
            }
        }
    }

    /// Records a close of this launch (first close emits `thread_closed`; a real exit may
    /// replace a synthesized one) and marks the view closed.
    async fn close(&self, child: &Arc<Child>, exit: ExitRecord) {
        let tid = child.thread_id.clone();
        let seq = child.launch_seq;
        let retry_exit = exit.clone();
        let result = self
            .inner
            .ingest
            .write(move |tx| close_row(tx, &tid, seq, &exit))
            .await;
        if let Err(e) = result {
            tracing::error!("recording the exit of {} failed: {e}", child.thread_id);
            if e.code == ErrorCode::Io {
                // A full disk or a passing I/O error must not leave the row claiming a process
                // that is gone: retry in the background until the write goes through. A retry
                // is harmless after a newer launch or a real exit (close_row is guarded by the
                // launch number and never replaces a real exit).
                let rt = self.clone();
                let tid = child.thread_id.clone();
                tokio::spawn(async move {
                    for attempt in 1..=CLOSE_RETRIES {
                        tokio::time::sleep(CLOSE_RETRY_EVERY).await;
                        let (id, exit) = (tid.clone(), retry_exit.clone());
                        let r = rt
                            .inner
                            .ingest
                            .write(move |tx| close_row(tx, &id, seq, &exit))
                            .await;
                        if r.is_ok() {
                            tracing::warn!(
                                "recorded the exit of {tid} after {attempt} retr{}",
                                if attempt == 1 { "y" } else { "ies" }
                            );
                            return;
                        }
                    }
                    tracing::error!("gave up recording the exit of {tid}; `threadbase restore` closes it once this serve has exited");
                });
            }
        }
        child.view.send_modify(|v| {
            v.closed = true;
            v.idle_since = None;
        });
        let mut children = self
            .inner
            .children
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if children
            .get(&*child.thread_id)
            .is_some_and(|c| Arc::ptr_eq(c, child))
        {
            children.remove(&*child.thread_id);
        }
    }
}

/// A launch under way ([`Runtime::reserve_launch`]); dropping it ends the reservation.
pub struct LaunchReservation {
    rt: Runtime,
    thread_id: String,
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

/// A prompt on its way to a child: `written` fires as the line is written, `answer` ends with
/// the child's answer (or its close).
struct PendingPrompt {
    written: tokio::sync::oneshot::Receiver<()>,
    answer: tokio::task::JoinHandle<std::result::Result<rpc::Response, CallError>>,
}

/// How long a prompt may hold the gate waiting for its answer.
const PROMPT_ANSWER_LIMIT: Duration = Duration::from_secs(600);

impl Child {
    /// Writes a `prompt` once no earlier prompt is unanswered (or with the gate `held` by
    /// the caller already). The gate stays held until this one is answered, even when the
    /// caller stops waiting. A prompt that must get the gate first is never written if its
    /// caller closed (or dropped) `written` before it got it.
    fn start_prompt(
        self: &Arc<Self>,
        fields: Value,
        held: Option<tokio::sync::OwnedMutexGuard<()>>,
    ) -> PendingPrompt {
        let (tx, written) = tokio::sync::oneshot::channel();
        let child = self.clone();
        let cancellable = held.is_none();
        let answer = tokio::spawn(async move {
            let _gate = match held {
                Some(gate) => gate,
                None => child.prompt_gate.clone().lock_owned().await,
            };
            if tx.send(()).is_err() && cancellable {
                return Err(CallError::Closed);
            }
            child
                .tracker
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .on_prompt_written();
            child.rpc.call("prompt", fields, PROMPT_ANSWER_LIMIT).await
        });
        PendingPrompt { written, answer }
    }
}

/// See [`Runtime::abort`]: waits at most `gate_wait` for an unanswered prompt (then writes
/// the abort anyway), and `timeout` for the abort's answer.
async fn abort_child(
    child: &Child,
    gate_wait: Duration,
    timeout: Duration,
) -> std::result::Result<rpc::Response, CallError> {
    let _gate = tokio::time::timeout(gate_wait, child.prompt_gate.lock())
        .await
        .ok();
    child.rpc.call("abort", json!({}), timeout).await
}

/// Closes one launch's row; emits `thread_closed` only when the row was live.
fn close_row(
    tx: &Transaction<'_>,
    thread_id: &str,
    launch_seq: i64,
    exit: &ExitRecord,
) -> Result<()> {
    let was_live: bool = tx
        .prepare_cached(include_str!("../../sql/thread_is_live_launch.sql"))?
        .query_row((thread_id, launch_seq), |r| r.get(0))
        .optional()?
        .unwrap_or(false);
    let at = now_iso();
    let changed = tx.prepare_cached(include_str!("../../sql/thread_close.sql"))?.execute(named_params! {
        ":phase": exit.closed_phase(), ":kind": exit.kind, ":code": exit.code, ":signal": exit.signal,
        ":message": exit.message, ":synthetic": exit.synthetic, ":at": at, ":id": thread_id, ":launch": launch_seq,
    })?;
    if changed > 0 && was_live {
        let data = json!({"exit": exit.to_json()}).to_string();
        events::append(
            tx,
            thread_id,
            &[NewEvent {
                at: &at,
                kind: "thread_closed",
                data: &data,
            }],
        )?;
    }
    Ok(())
}

async fn wait_closed(view: &mut watch::Receiver<ChildView>, limit: Duration) -> bool {
    tokio::time::timeout(limit, view.wait_for(|v| v.closed))
        .await
        .is_ok_and(|r| r.is_ok())
}

async fn write_stdin(mut stdin: tokio::process::ChildStdin, mut rx: mpsc::Receiver<Vec<u8>>) {
    while let Some(line) = rx.recv().await {
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
}

async fn read_stdout(rt: Runtime, child: Arc<Child>, stdout: tokio::process::ChildStdout) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut buf = Vec::with_capacity(8 * 1024);
    while let Some(line) = rpc::read_line(&mut reader, &mut buf).await {
        let effects = match line {
            Line::Json(v) if v["type"] == "response" => {
                // A prompt's or get_state's answer is applied here, in stream order, before the
                // events that follow it: applied later by its caller, a stale answer could undo
                // events that arrived after it.
                let mut refreshed_idle = None;
                let effects = {
                    let mut tracker = child.tracker.lock().unwrap_or_else(|p| p.into_inner());
                    if v["command"] == "prompt" {
                        tracker.on_prompt_answer(&v)
                    } else if v["command"] == "get_state" && v["success"] == true {
                        let (mut effects, idle) = tracker.on_state(&v["data"]);
                        refreshed_idle = Some(idle);
                        effects.push(Effect::SessionState {
                            name: v["data"]["sessionName"].as_str().map(str::to_string),
                            pending: v["data"]["pendingMessageCount"].as_i64(),
                        });
                        effects
                    } else {
                        Vec::new()
                    }
                };
                rt.apply(&child, effects).await;
                if child.rpc.deliver_with(&v, refreshed_idle)
                    || v.get("id").is_some_and(|id| !id.is_null())
                {
                    continue;
                }
                let err = v["error"].as_str().unwrap_or("unknown error");
                vec![Effect::Event(
                    "thread_error",
                    json!({"message": format!("The child rejected a command line: {err}")}),
                )]
            }
            Line::Json(v) => child
                .tracker
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .on_event(&v),
            Line::Invalid(text) => vec![Effect::Event(
                "thread_error",
                json!({"message": format!("The child wrote a stdout line that is not a JSON object: {text}")}),
            )],
            Line::TooLong(n) => vec![Effect::Event(
                "thread_error",
                json!({"message": format!("Dropped a child stdout line of {n} bytes (over the {} byte cap).", rpc::MAX_LINE_BYTES)}),
            )],
        };
        rt.apply(&child, effects).await;
    }
    child.rpc.close();
}

async fn read_stderr(ingest: Ingest, thread_id: Arc<str>, mut stderr: tokio::process::ChildStderr) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                ingest
                    .send(IngestOp::Stderr {
                        thread_id: thread_id.clone(),
                        bytes: buf[..n].to_vec(),
                    })
                    .await
            }
        }
    }
}

async fn wait_exit(
    rt: Runtime,
    child: Arc<Child>,
    mut proc: tokio::process::Child,
    out_task: tokio::task::JoinHandle<()>,
    err_task: tokio::task::JoinHandle<()>,
) {
    let status = proc.wait().await;
    // The child is gone; processes left in its group (commands it started in the background,
    // the `serve` of its own extension) would outlive the thread unseen. They get SIGTERM and
    // a grace period (a nested serve uses it to stop its own children), then SIGKILL. While
    // the group has members its id cannot have been handed to another group.
    if process::group_has_members(child.pgid) {
        tokio::spawn(end_leftover_group(child.pgid));
    }
    // Let the pipes drain so the last events land before the close.
    let _ = tokio::time::timeout(PIPE_DRAIN, out_task).await;
    let _ = tokio::time::timeout(PIPE_DRAIN, err_task).await;
    let (code, signal) = match &status {
        Ok(s) => (s.code().map(i64::from), s.signal().map(signal_name)),
        Err(_) => (None, None),
    };
    let exit = ExitRecord::classify(code, signal, child.stop_requested.load(Ordering::SeqCst));
    tracing::info!(
        kind = exit.kind,
        code = exit.code,
        signal = exit.signal.as_deref(),
        "child exited"
    );
    rt.close(&child, exit).await;
}

/// How long what is left of an exited child's group may take to end after SIGTERM.
const LEFTOVER_GRACE: Duration = Duration::from_millis(3_000);

async fn end_leftover_group(pgid: i64) {
    process::signal_group(pgid, GroupSignal::Terminate);
    let deadline = Instant::now() + LEFTOVER_GRACE;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if !process::group_has_members(pgid) {
            return;
        }
    }
    if process::group_has_members(pgid) {
        process::signal_group(pgid, GroupSignal::Kill);
    }
}

/// Stops a child when its idle-cleanup or live-timeout deadline passes.
async fn run_timers(rt: Runtime, child: Arc<Child>) {
    let cfg = rt.inner.config;
    if cfg.idle_cleanup.is_none() && cfg.live_timeout.is_none() {
        return;
    }
    let launched = Instant::now();
    let mut view = child.view.subscribe();
    loop {
        let v = view.borrow_and_update().clone();
        if v.closed || v.phase == Phase::Stopping {
            return;
        }
        let live_deadline = cfg.live_timeout.map(|d| launched + d);
        let idle_deadline = match (cfg.idle_cleanup, v.phase, v.idle_since) {
            (Some(d), Phase::Idle, Some(since)) => Some(since + d),
            _ => None,
        };
        let next = [live_deadline, idle_deadline].into_iter().flatten().min();
        tokio::select! {
            changed = view.changed() => if changed.is_err() { return },
            _ = sleep_until_opt(next) => {
                let _ = rt.stop(&child.thread_id, false).await;
                return;
            }
        }
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

/// `SIGKILL` for 9, and so on.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => return format!("SIG{sig}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::ExitRecord;
    use serde_json::json;

    /// pi-threads' `classifyProcessExit` (test/thread-manager.test.ts, "classifies non-zero
    /// natural child exits as failed": `{kind: "failed", message: "Child Pi process exited with
    /// code 1"}`): only the known parts of the status are named.
    #[test]
    fn golden_failed_exit_names_only_the_known_parts() {
        let failed = |code: Option<i64>, signal: Option<&str>| {
            ExitRecord::classify(code, signal.map(str::to_string), false).to_json()
        };
        assert_eq!(
            failed(Some(1), None),
            json!({"kind": "failed", "message": "Child Pi process exited with code 1"})
        );
        assert_eq!(
            failed(None, Some("SIGKILL")),
            json!({"kind": "failed", "message": "Child Pi process exited with signal SIGKILL"})
        );
        assert_eq!(
            failed(Some(2), Some("SIGTERM")),
            json!({"kind": "failed", "message": "Child Pi process exited with code 2, signal SIGTERM"})
        );
        assert_eq!(
            failed(None, None),
            json!({"kind": "failed", "message": "Child Pi process exited with unknown status"})
        );
        // A clean exit and any close after a stop request keep their code and signal.
        assert_eq!(
            ExitRecord::classify(Some(0), None, false).to_json(),
            json!({"kind": "exited", "code": 0, "signal": null})
        );
        assert_eq!(
            ExitRecord::classify(None, Some("SIGTERM".into()), true).to_json(),
            json!({"kind": "stopped", "code": null, "signal": "SIGTERM"})
        );
        assert_eq!(
            ExitRecord::classify(Some(1), None, true).to_json(),
            json!({"kind": "stopped", "code": 1, "signal": null})
        );
    }
}
