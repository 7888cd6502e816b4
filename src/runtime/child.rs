//! One live child: its state ([`Child`]), its pipes (the stdin writer, the stdout reader that
//! applies answers and events in stream order, the stderr reader), and what is said to it
//! (send, refresh, abort, call). Kept apart from launch and stop so the stream's ordering
//! rules live in one place.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

use super::ingest::{Ingest, IngestOp};
use super::mapping::{self, Effect, Phase, Tracker};
use super::rpc::{self, CallError, Line, RpcClient};
use super::Runtime;
use crate::domain::ThreadId;
use crate::error::{Error, ErrorCode, Result};
use crate::time::now_iso;

/// RPC timeout of a send (from the moment it is written).
pub const SEND_TIMEOUT: Duration = Duration::from_millis(5_000);
/// How long a send or abort waits for the child to answer an earlier prompt before it is
/// written (a child still booting answers its launch prompt only when it is up).
pub const PROMPT_GATE_WAIT: Duration = Duration::from_secs(30);
/// Partial assistant text is written at most this often while streaming.
const PARTIAL_FLUSH: Duration = Duration::from_millis(25);

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

    /// The mailbox kind a delivered send of this mode is recorded as.
    pub fn as_mail_kind(self) -> crate::domain::MailKind {
        match self {
            SendMode::Prompt => crate::domain::MailKind::Prompt,
            SendMode::Steer => crate::domain::MailKind::Steer,
            SendMode::FollowUp => crate::domain::MailKind::FollowUp,
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
    /// A question of the child waits for the parent's answer (`THREADBASE_UI=parent`).
    pub asking: bool,
}

/// One launch's process as the runtime holds it: its RPC client, what its stream says, and
/// the view observers watch.
pub(super) struct Child {
    pub(super) thread_id: Arc<ThreadId>,
    pub(super) pgid: i64,
    pub(super) launch_seq: i64,
    pub(super) rpc: RpcClient,
    pub(super) tracker: Mutex<Tracker>,
    pub(super) view: watch::Sender<ChildView>,
    pub(super) stop_requested: AtomicBool,
    /// The session's own stop asked for this close: no notice for the parent.
    pub(super) quiet_close: AtomicBool,
    /// Why a stop nobody in the session asked for was made (a queued row took its slot,
    /// `Runtime::yield_slot`): the stopped exit's message, which the parent's notice quotes.
    pub(super) stop_note: Mutex<Option<String>>,
    pub(super) partial: Mutex<(String, Option<Instant>)>,
    /// Held from writing a `prompt` until its answer. Pi 1.6 checks whether it is busy only
    /// after a prompt's asynchronous preflight, so a second prompt written before the first is
    /// answered (a follow-up to a thread still starting, two concurrent sends) is also answered
    /// `started`, then silently dropped; its stray `agent_settled` and a reset `isStreaming`
    /// make the running thread look idle. One prompt in flight per child avoids all of it.
    pub(super) prompt_gate: Arc<tokio::sync::Mutex<()>>,
    /// Why the runtime itself stopped it, for the exit message (an inactivity timeout).
    pub(super) stop_reason: Mutex<Option<String>>,
    /// The stall its parent was told of (its `since`), so it is told once.
    pub(super) stall_told: Mutex<Option<String>>,
}

impl Runtime {
    /// Sends a message to a live child (`prompt`, or `prompt` with a streaming behaviour).
    pub async fn send(
        &self,
        thread_id: &ThreadId,
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

    /// Asks a live child held here for its state and updates the phase; when it returns,
    /// everything the child said before its answer (and the answer's phase) is committed, so
    /// a read that follows sees it. Returns whether this refresh read idle with nothing
    /// pending, and the raw state. A thread this serve does not hold live is an error, and
    /// waits for nothing.
    pub async fn refresh(&self, thread_id: &ThreadId, timeout: Duration) -> Result<(bool, Value)> {
        let child = self.live_child(thread_id)?;
        let answer = child.rpc.call("get_state", json!({}), timeout).await;
        self.inner.ingest.flush().await;
        let resp = answer.map_err(|e| {
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
    pub async fn abort(&self, thread_id: &ThreadId, timeout: Duration) -> Result<rpc::Response> {
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
        thread_id: &ThreadId,
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

    fn live_child(&self, thread_id: &ThreadId) -> Result<Arc<Child>> {
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
                            phase,
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
                Effect::TurnError(error) => {
                    ingest
                        .send(IngestOp::TurnError {
                            thread_id: tid.clone(),
                            at: now_iso(),
                            error,
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
                Effect::AskUi(dialog) => self.ask_parent(child, dialog),
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
}

/// A prompt on its way to a child: `written` fires as the line is written, `answer` ends with
/// the child's answer (or its close).
pub(super) struct PendingPrompt {
    pub(super) written: tokio::sync::oneshot::Receiver<()>,
    pub(super) answer: tokio::task::JoinHandle<std::result::Result<rpc::Response, CallError>>,
}

/// How long a prompt may hold the gate waiting for its answer.
const PROMPT_ANSWER_LIMIT: Duration = Duration::from_secs(600);

impl Child {
    /// Writes a `prompt` once no earlier prompt is unanswered (or with the gate `held` by
    /// the caller already). The gate stays held until this one is answered, even when the
    /// caller stops waiting. A prompt that must get the gate first is never written if its
    /// caller closed (or dropped) `written` before it got it.
    pub(super) fn start_prompt(
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
pub(super) async fn abort_child(
    child: &Child,
    gate_wait: Duration,
    timeout: Duration,
) -> std::result::Result<rpc::Response, CallError> {
    let _gate = tokio::time::timeout(gate_wait, child.prompt_gate.lock())
        .await
        .ok();
    child.rpc.call("abort", json!({}), timeout).await
}

pub(super) async fn write_stdin(
    mut stdin: tokio::process::ChildStdin,
    mut rx: mpsc::Receiver<Vec<u8>>,
) {
    while let Some(line) = rx.recv().await {
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
}

pub(super) async fn read_stdout(
    rt: Runtime,
    child: Arc<Child>,
    stdout: tokio::process::ChildStdout,
) {
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
                        effects.extend(tracker.session_state(&v["data"]));
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
            Line::Json(v) => {
                let (effects, active) = {
                    let mut tracker = child.tracker.lock().unwrap_or_else(|p| p.into_inner());
                    (tracker.on_event(&v), tracker.activity_due(Instant::now()))
                };
                if active {
                    rt.inner
                        .ingest
                        .send(IngestOp::Activity {
                            thread_id: child.thread_id.clone(),
                            at: now_iso(),
                        })
                        .await;
                }
                effects
            }
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

pub(super) async fn read_stderr(
    ingest: Ingest,
    thread_id: Arc<ThreadId>,
    mut stderr: tokio::process::ChildStderr,
) {
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
