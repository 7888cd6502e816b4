//! Contract C's results: a worker's facts as read from the store ([`WorkerFacts`]), its
//! `WorkerView` and list status, the list, send and report results, and the model read from
//! a worker's Pi args.

use serde::Serialize;
use serde_json::{json, Value};

use super::*;

/// Everything a `WorkerView` and a list status are made of, as read from the store.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerFacts {
    pub worker_id: WorkerId,
    pub coordinator_id: SessionId,
    pub key: String,
    pub title: Option<String>,
    pub directory: String,
    pub agent: Option<String>,
    /// `{providerID, id, variant?}` when known.
    pub model: Option<Model>,
    pub outcome: Option<Outcome>,
    pub report: Option<Report>,
    /// The hidden override.
    pub hidden_override: Option<bool>,
    /// The process row's status and phase.
    pub status: ThreadStatus,
    pub phase: Phase,
    /// Issue 30, `THREADBASE_QUEUE=1`: waiting for a slot, at this position.
    pub queue_position: Option<i64>,
    /// Issue 33, a team database: live on a host whose lease ran out (read by `threads_list`).
    pub unreachable: Option<crate::store::hosts::Unreachable>,
    /// Issue 45: what needs the user about it (the view `thread_attention`; read by
    /// `threads_list`).
    pub attention: Option<crate::store::attention::Need>,
    /// Issue 48: `threads_spawn` with `THREADBASE_ISOLATION=worktree` in a directory outside
    /// a git work tree: why the worker runs without a worktree.
    pub isolation_note: Option<String>,
}

impl WorkerFacts {
    /// `hidden`: the override when set, else true exactly for a PASS / PASS WITH NOTES report.
    pub fn hidden(&self) -> bool {
        self.hidden_override
            .unwrap_or_else(|| self.report.as_ref().is_some_and(Report::hides))
    }

    /// The contract's `WorkerView`, exactly its ten fields.
    pub fn view(&self) -> WorkerView<'_> {
        WorkerView {
            worker_id: self.worker_id.as_str(),
            coordinator_id: self.coordinator_id.as_str(),
            key: &self.key,
            title: self.title.as_deref().unwrap_or(&self.key),
            directory: &self.directory,
            agent: self.agent.as_deref(),
            model: self.model.as_ref(),
            outcome: self.outcome,
            report: self.report.as_ref(),
            hidden: self.hidden(),
            status: self.queue_position.map(QueuedStatus),
            host_unreachable: self.unreachable.as_ref(),
            attention: self.attention.as_ref(),
            isolation_note: self.isolation_note.as_deref(),
        }
    }

    /// The list status (see [`list_status`]).
    pub fn list_status(&self) -> &str {
        list_status(
            self.status,
            self.phase,
            self.report.as_ref().map(|r| r.verdict.as_str()),
            self.outcome,
        )
    }
}

/// A worker's status as the original's terminal UI lists it, first match: `needs input`
/// (never: the runtime answers dialogs itself) > `running` (a live process in a run) > the
/// report verdict > `starting` (outcome null) > `no report` (succeeded) > `failed` /
/// `interrupted`. Not part of any tool result: `threadbase top` shows it.
pub fn list_status(
    status: ThreadStatus,
    phase: Phase,
    verdict: Option<&str>,
    outcome: Option<Outcome>,
) -> &str {
    if status == ThreadStatus::Live && phase == Phase::Busy {
        return "running";
    }
    if let Some(v) = verdict {
        return v;
    }
    match outcome {
        None => "starting",
        Some(Outcome::Succeeded) => "no report",
        Some(o @ (Outcome::Failed | Outcome::Interrupted)) => o.as_str(),
    }
}

/// The contract's `WorkerView`, borrowed from [`WorkerFacts`].
#[derive(Debug, Clone, Copy, Serialize)]
pub struct WorkerView<'a> {
    #[serde(rename = "workerID")]
    pub worker_id: &'a str,
    #[serde(rename = "coordinatorID")]
    pub coordinator_id: &'a str,
    pub key: &'a str,
    pub title: &'a str,
    pub directory: &'a str,
    pub agent: Option<&'a str>,
    pub model: Option<&'a Model>,
    pub outcome: Option<Outcome>,
    pub report: Option<&'a Report>,
    pub hidden: bool,
    /// Not one of the contract's ten fields: present only while the worker waits in the queue
    /// (`THREADBASE_QUEUE=1`, issue 30), `queued (position N)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<QueuedStatus>,
    /// Not one of the contract's ten fields either: present only while the worker is live on
    /// a host whose lease ran out (issue 33), `{hostId, since}`.
    #[serde(rename = "hostUnreachable", skip_serializing_if = "Option::is_none")]
    pub host_unreachable: Option<&'a crate::store::hosts::Unreachable>,
    /// Nor this: present only when something about the worker needs the user (issue 45, the
    /// view `thread_attention`): `{attention, since, detail}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attention: Option<&'a crate::store::attention::Need>,
    /// Nor this: present only when `threads_spawn` asked for a worktree (issue 48) and the
    /// directory is not in a git work tree: why it runs without one.
    #[serde(rename = "isolationNote", skip_serializing_if = "Option::is_none")]
    pub isolation_note: Option<&'a str>,
}

/// A queued worker's `status`: `queued (position N)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuedStatus(pub i64);

impl Serialize for QueuedStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("queued (position {})", self.0))
    }
}

/// A worker's model, `{providerID, id, variant?}`, as stored on its row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Model {
    #[serde(rename = "providerID")]
    pub provider_id: String,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// `{workers}`: `threads_list`, `threads.snapshot` and `threads.restore`, exactly as the
/// original returns them (the list statuses of its terminal UI are threadbase's own views':
/// `threadbase top`, [`list_status`]).
#[derive(Debug, Serialize)]
pub struct Workers<'a> {
    pub workers: Vec<WorkerView<'a>>,
}

impl<'a> Workers<'a> {
    /// The views of `facts`, in their order.
    pub fn of(facts: impl IntoIterator<Item = &'a WorkerFacts>) -> Workers<'a> {
        Workers {
            workers: facts.into_iter().map(WorkerFacts::view).collect(),
        }
    }
}

/// `threads_send`'s result.
#[derive(Debug, Serialize)]
pub struct Sent<'a> {
    #[serde(rename = "workerID")]
    pub worker_id: &'a str,
    #[serde(rename = "messageID")]
    pub message_id: &'a str,
}

/// `threads_report`'s result.
#[derive(Debug, Serialize)]
pub struct Reported<'a> {
    #[serde(rename = "workerID")]
    pub worker_id: &'a str,
    pub report: &'a Report,
}

/// The model a worker runs with, from its Pi args (`--provider P --model ID` or
/// `--model P/ID[:LEVEL]`; the last occurrence wins). `None` unless provider and id are known.
pub fn model_from_args(args: &[String]) -> Option<Value> {
    let mut provider: Option<String> = None;
    let mut model: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--provider" => {
                provider = args.get(i + 1).cloned();
                i += 1;
            }
            "--model" => {
                model = args.get(i + 1).cloned();
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    let model = model?;
    let (prefix, rest) = match model.split_once('/') {
        Some((p, r)) if !p.is_empty() => (Some(p.to_string()), r.to_string()),
        _ => (None, model.clone()),
    };
    let (id, variant) = match rest.rsplit_once(':') {
        Some((id, level)) if !id.is_empty() && !level.is_empty() => {
            (id.to_string(), Some(level.to_string()))
        }
        _ => (rest, None),
    };
    let provider = provider.or(prefix)?;
    if id.is_empty() {
        return None;
    }
    let mut v = json!({"providerID": provider, "id": id});
    if let Some(level) = variant {
        v["variant"] = json!(level);
    }
    Some(v)
}
