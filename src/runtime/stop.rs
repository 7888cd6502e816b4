//! How a child ends: a stop request (abort, SIGTERM to the group, SIGKILL), its exit and
//! what is left of its process group, and the close of its row ([`ExitRecord`]). One place
//! decides how an exit reads, whether it came from the process or was synthesized by a stop.

use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::watch;

use super::child::{abort_child, Child, ChildView};
use super::mapping::Phase;
use super::signals::{self, GroupSignal};
use super::{Runtime, LAUNCH_WAIT, LOG_TARGET};
use crate::domain::{ExitKind, ThreadId};
use crate::error::{ErrorCode, Result};
use crate::store::events::{self, NewEvent};
use crate::store::Tx;
use crate::store::{lifecycle, notices};
use crate::time::now_iso;

/// A close that failed with an I/O error (a full disk) is retried this often, this many times.
const CLOSE_RETRY_EVERY: Duration = Duration::from_secs(1);
const CLOSE_RETRIES: u32 = 600;
/// Graceful stop: abort timeout, then the wait after SIGTERM, then after SIGKILL.
pub const STOP_ABORT_TIMEOUT: Duration = Duration::from_millis(1_500);
pub const STOP_TERM_WAIT: Duration = Duration::from_millis(1_500);
pub const STOP_KILL_WAIT: Duration = Duration::from_millis(300);
/// After the process exits, how long to wait for its pipes to drain (a grandchild may keep
/// them open).
const PIPE_DRAIN: Duration = Duration::from_millis(500);

/// How a process ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ExitRecord {
    pub kind: ExitKind,
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
            (ExitKind::Stopped, None)
        } else if code == Some(0) && signal.is_none() {
            (ExitKind::Exited, None)
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
                ExitKind::Failed,
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
            ExitKind::Failed | ExitKind::Stale => {
                json!({"kind": self.kind, "message": self.message})
            }
            ExitKind::Exited | ExitKind::Stopped => {
                json!({"kind": self.kind, "code": self.code, "signal": self.signal})
            }
        }
    }

    /// The phase of a thread closed with this exit.
    pub fn closed_phase(&self) -> Phase {
        match self.kind {
            ExitKind::Stale => Phase::Stale,
            ExitKind::Failed => Phase::Failed,
            ExitKind::Exited if self.code != Some(0) || self.signal.is_some() => Phase::Failed,
            ExitKind::Exited | ExitKind::Stopped => Phase::Idle,
        }
    }
}

/// Who asked for a stop. The session's own asking (its `stop`, its end) closes the thread
/// quietly: its result says so. Anyone else's (a command row from `threadbase stop`, `top` or
/// an ancestor session; an idle-cleanup or live timeout) tells the thread's parent with a
/// notice ([`crate::store::notices`]), as an exit nobody asked for does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopBy {
    Caller,
    Other,
}

impl Runtime {
    /// Stops a live child: graceful (abort, SIGTERM to the group, SIGKILL) or `force`
    /// (SIGKILL at once). Returns false when it was not live here (a no-op).
    pub async fn stop(&self, thread_id: &ThreadId, force: bool, by: StopBy) -> Result<bool> {
        self.await_launch(thread_id, LAUNCH_WAIT).await;
        let Some(child) = self.child(thread_id) else {
            return Ok(false);
        };
        if child.view.borrow().closed {
            return Ok(false);
        }
        if by == StopBy::Caller {
            child.quiet_close.store(true, Ordering::SeqCst);
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
                    lifecycle::request_stop(tx, &tid, &now_iso())?;
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
            signals::signal_group(child.pgid, GroupSignal::Terminate);
            if wait_closed(&mut view, STOP_TERM_WAIT).await {
                return Ok(true);
            }
        }
        signals::signal_group(child.pgid, GroupSignal::Kill);
        if wait_closed(&mut view, STOP_KILL_WAIT).await {
            return Ok(true);
        }
        // The process has not reported its exit: record a synthesized one; a late real exit
        // of this launch replaces it.
        let exit = ExitRecord {
            kind: ExitKind::Stopped,
            code: None,
            signal: Some("SIGKILL".into()),
            message: None,
            synthetic: true,
        };
        self.close(&child, exit).await;
        Ok(true)
    }

    /// Stops an idle child the way idle cleanup does (graceful, the parent told with a notice,
    /// resumable), because a queued thread takes its slot (`THREADBASE_QUEUE_IDLE_MS`): `note`
    /// becomes its stopped exit's message, which the notice quotes. False (nothing done) when
    /// it is not live here or no longer idle.
    pub async fn yield_slot(&self, thread_id: &ThreadId, note: String) -> Result<bool> {
        let Some(child) = self.child(thread_id) else {
            return Ok(false);
        };
        {
            let v = child.view.borrow();
            if v.closed || v.phase != Phase::Idle {
                return Ok(false);
            }
        }
        *child.stop_note.lock().unwrap_or_else(|p| p.into_inner()) = Some(note);
        self.stop(thread_id, false, StopBy::Other).await
    }

    /// Stops every live child gracefully, all at once, and flushes the writer.
    pub async fn shutdown(&self) {
        let mut stops = tokio::task::JoinSet::new();
        for id in self.live_ids() {
            let rt = self.clone();
            stops.spawn(async move { rt.stop(&id, false, StopBy::Caller).await });
        }
        while let Some(r) = stops.join_next().await {
            if let Ok(Err(e)) = r {
                tracing::warn!(target: LOG_TARGET, "stop during shutdown failed: {e}");
            }
        }
        self.flush().await;
    }

    /// Records a close of this launch (first close emits `thread_closed`; a real exit may
    /// replace a synthesized one) and marks the view closed.
    async fn close(&self, child: &Arc<Child>, mut exit: ExitRecord) {
        if exit.kind == ExitKind::Stopped && exit.message.is_none() {
            exit.message = child
                .stop_note
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
        }
        let tid = child.thread_id.clone();
        let seq = child.launch_seq;
        let notice = !child.quiet_close.load(Ordering::SeqCst);
        let retry_exit = exit.clone();
        let result = self
            .inner
            .ingest
            .write(move |tx| close_row(tx, &tid, seq, &exit, notice))
            .await;
        if let Err(e) = result {
            tracing::error!(target: LOG_TARGET, "recording the exit of {} failed: {e}", child.thread_id);
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
                            .write(move |tx| close_row(tx, &id, seq, &exit, notice))
                            .await;
                        if r.is_ok() {
                            tracing::warn!(target: LOG_TARGET,
                                "recorded the exit of {tid} after {attempt} retr{}",
                                if attempt == 1 { "y" } else { "ies" }
                            );
                            return;
                        }
                    }
                    tracing::error!(target: LOG_TARGET, "gave up recording the exit of {tid}; `threadbase restore` closes it once this serve has exited");
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

/// Closes one launch's row; emits `thread_closed` only when the row was live, and then, with
/// `notice`, writes the parent's notice (contract A's threads; the session's own stop and a
/// launch its caller saw fail close without one).
pub(super) fn close_row(
    tx: &Tx<'_>,
    thread_id: &ThreadId,
    launch_seq: i64,
    exit: &ExitRecord,
    notice: bool,
) -> Result<()> {
    let was_live = lifecycle::is_live_launch(tx, thread_id, launch_seq)?;
    let at = now_iso();
    let row_exit = lifecycle::Exit {
        phase: exit.closed_phase(),
        kind: exit.kind,
        code: exit.code,
        signal: exit.signal.as_deref(),
        message: exit.message.as_deref(),
        synthetic: exit.synthetic,
    };
    let changed = lifecycle::close(tx, thread_id, launch_seq, &row_exit, &at)?;
    if changed {
        // No question outlives its thread's process (THREADBASE_UI=parent).
        let by = if exit.kind == ExitKind::Stopped {
            "stop"
        } else {
            "exit"
        };
        crate::store::questions::cancel_thread(tx, thread_id, by, &at)?;
    }
    if changed && was_live {
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
        if notice {
            notices::write(tx, thread_id, notices::Cause::Closed, &at)?;
        }
    }
    Ok(())
}

pub(super) async fn wait_closed(view: &mut watch::Receiver<ChildView>, limit: Duration) -> bool {
    tokio::time::timeout(limit, view.wait_for(|v| v.closed))
        .await
        .is_ok_and(|r| r.is_ok())
}

pub(super) async fn wait_exit(
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
    if signals::group_has_members(child.pgid) {
        tokio::spawn(end_leftover_group(child.pgid));
    }
    // Let the pipes drain so the last events land before the close.
    let _ = tokio::time::timeout(PIPE_DRAIN, out_task).await;
    let _ = tokio::time::timeout(PIPE_DRAIN, err_task).await;
    let (code, signal) = match &status {
        Ok(s) => (s.code().map(i64::from), s.signal().map(signal_name)),
        Err(_) => (None, None),
    };
    let mut exit = ExitRecord::classify(code, signal, child.stop_requested.load(Ordering::SeqCst));
    if let Some(reason) = child
        .stop_reason
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
    {
        exit.message = Some(reason);
    }
    tracing::info!(target: LOG_TARGET,
        kind = exit.kind.as_str(),
        code = exit.code,
        signal = exit.signal.as_deref(),
        "child exited"
    );
    rt.close(&child, exit).await;
}

/// How long what is left of an exited child's group may take to end after SIGTERM.
const LEFTOVER_GRACE: Duration = Duration::from_millis(3_000);

async fn end_leftover_group(pgid: i64) {
    signals::signal_group(pgid, GroupSignal::Terminate);
    let deadline = Instant::now() + LEFTOVER_GRACE;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if !signals::group_has_members(pgid) {
            return;
        }
    }
    if signals::group_has_members(pgid) {
        signals::signal_group(pgid, GroupSignal::Kill);
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
