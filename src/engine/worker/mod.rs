//! Contract C's worker tools (`threads_*`) and RPC (`threads.snapshot`, `threads.restore`),
//! one file per method, on top of the store and the runtime. What spawn and send share (bringing
//! a worker up, delivering its messages) is `drive.rs`; how runs end is `monitor.rs`. Rows are
//! read and written through `store::workers` and `store::reports` only: no SQL here.
//!
//! - **Identity.** The caller is this serve's session (`ServeConfig.session_id`). A worker is a
//!   top-level `threads` row at `/<workerID>` under its coordinator's `worker` manager, with
//!   `id = session_id = workerID = "ses_" + digest([coordinatorID, key])[..32]`.
//! - **Spawn** checks everything (role, directory, grants, agent profile) before any write, then
//!   in one `BEGIN IMMEDIATE` transaction either finds the worker (same fingerprint required, no
//!   limit check) or counts slots, inserts the row and admits the initial prompt as a pending
//!   `to_child` mailbox row. Outside the transaction the worker is brought up (launched, or
//!   relaunched on its session file) and pending messages are delivered.
//! - **Delivery** runs under a per-worker lock: only rows still `pending` are sent, each marked
//!   `delivered` in its own transaction right after the child accepted it (or after a send that
//!   was written but not answered in time), so an identical spawn retry or send retry never
//!   sends a message twice (Trap 8). A rejected message stays pending and is sent again by the
//!   next retry.
//! - **Outcome** is stored in `threads.outcome` by a monitor task per launch, which watches the
//!   child's phase: when the child goes idle after a run, the run `succeeded`, or `failed` when a
//!   `thread_error` event was recorded during it, or `interrupted` when `threads_interrupt` (or
//!   an `interrupt` command row) aborted it; when the process closes mid-run the run is
//!   `interrupted` (or `failed` for a failed exit), and a failed exit while idle is `failed`. A
//!   closed worker without a stored outcome (its process closed before the first run ended,
//!   e.g. restored as stale by another process) reads as `failed`/`interrupted` (SQL in
//!   `worker_by_id.sql` and `worker_slots_used.sql`). A prompt the child rejects is `failed`.
//! - **Model** (`{providerID, id, variant?}`) is the one the worker's Pi args name
//!   (`--provider`/`--model`, inherited or from the agent profile), stored at spawn; otherwise
//!   it is read from the worker's session file (last `model_change` or assistant message) when
//!   its first run ends. No `get_state` is sent for it, so no extra answer races a run.
//! - **Report** is called by the worker's own serve (caller = workerID): the report row and a
//!   `to_parent` mailbox row `kind = 'report'` (the coordinator's notice) are inserted in one
//!   transaction; the row watcher of the coordinator's serve delivers that notice.

pub(super) mod drive;
pub(super) mod hide;
pub(super) mod interrupt;
pub(super) mod list;
mod monitor;
pub(super) mod report;
pub(super) mod restore;
pub(super) mod send;
pub(super) mod snapshot;
pub(super) mod spawn;

pub use restore::restore_workers;
pub use snapshot::snapshot_workers;

use crate::domain::{ThreadId, WorkerId};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use super::Engine;
use crate::contract::worker::{worker_identity, Model, Report, WorkerFacts};
use crate::contract::ToolResult;
use crate::engine::Reply;
use crate::error::{Error, ErrorCode, Result};
use crate::store::reports::ReportRow;
use crate::store::workers::{self, Outcome, WorkerRow};
use crate::store::Conn;
use crate::store::Store;

/// Workers whose current run `threads_interrupt` is aborting; the monitor records the run as
/// interrupted and removes the entry. One set per engine (it was process-global).
#[derive(Clone, Default)]
pub(crate) struct Interrupting(Arc<Mutex<HashSet<ThreadId>>>);

impl Interrupting {
    fn set(&self) -> std::sync::MutexGuard<'_, HashSet<ThreadId>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub(super) fn insert(&self, id: &ThreadId) {
        self.set().insert(id.clone());
    }
    pub(super) fn contains(&self, id: &ThreadId) -> bool {
        self.set().contains(id)
    }
    pub(super) fn remove(&self, id: &ThreadId) {
        self.set().remove(id);
    }
}

/// A tool result whose details are the view of one worker, shaped and serialized at the edge.
fn answer_worker(facts: WorkerFacts) -> Result<Reply> {
    Ok(Reply::shaped(move |w| tool_result(w, &facts.view())))
}

/// `{content: [{type: "text", text: <the JSON>}], details}`: the details serialized once, and
/// their text put in both places.
fn tool_result(w: &mut dyn std::io::Write, result: &impl Serialize) -> Result<()> {
    let value = serde_json::value::to_raw_value(result)?;
    crate::engine::reply::json(w, &ToolResult::new(value.get(), &*value))
}

// ---- rows ---------------------------------------------------------------------------------

/// A worker as the verbs use it: the contract's facts and what launching and control need.
#[derive(Debug, Clone)]
struct Worker {
    /// Its thread row's id (the text of its workerID).
    id: ThreadId,
    facts: WorkerFacts,
    /// The agent profile's Pi args.
    args: Vec<String>,
    session_file: Option<String>,
    owner: Option<crate::identity::Owner>,
    report_message_id: Option<String>,
    parent_path: Option<String>,
}

impl Worker {
    fn id(&self) -> &ThreadId {
        &self.id
    }
}

impl From<WorkerRow> for Worker {
    fn from(r: WorkerRow) -> Self {
        Worker {
            facts: WorkerFacts {
                worker_id: WorkerId::new(r.id.as_str()),
                coordinator_id: r.coordinator_id.unwrap_or_default(),
                key: r.spawn_key.unwrap_or_default(),
                title: r.title,
                directory: r.cwd,
                agent: r.agent,
                model: r
                    .model
                    .as_deref()
                    .and_then(|m| serde_json::from_str::<Model>(m).ok()),
                outcome: r.outcome,
                report: r.report.map(contract_report),
                hidden_override: r.hidden,
                status: r.status,
                phase: r.phase,
                queue_position: None,
                unreachable: None,
                attention: None,
                isolation_note: None,
            },
            id: r.id,
            args: r.args,
            session_file: r.session_file,
            owner: crate::identity::Owner::recorded(
                r.owner_pid,
                r.owner_started_at,
                r.owner_host.as_deref(),
                r.owner_boot.as_deref(),
            ),
            report_message_id: r.report_message_id,
            parent_path: r.parent_path,
        }
    }
}

/// A stored report as the contract shows it.
fn contract_report(r: ReportRow) -> Report {
    Report {
        verdict: r.verdict,
        summary: r.summary,
        evidence: r.evidence,
    }
}

/// The facts of `rows`, in their order: what needs the user about each in one query, and the
/// live ones' queue positions in one more over their ids, whatever their number.
fn facts_of(
    conn: &Conn,
    rows: Vec<WorkerRow>,
    hosts: crate::store::facts::HostCheck,
) -> Result<Vec<WorkerFacts>> {
    let workers: Vec<Worker> = rows.into_iter().map(Worker::from).collect();
    let (live, ids) = crate::store::facts::live_ids(
        workers
            .iter()
            .map(|w| (w.id(), w.facts.status == crate::domain::ThreadStatus::Live)),
    )?;
    let all = crate::store::ThreadIds::new(workers.iter().map(|w| w.id()))?;
    let needs = crate::store::attention::of_threads(conn, &all)?;
    let mut facts: Vec<WorkerFacts> = workers.into_iter().map(|w| w.facts).collect();
    for (f, need) in facts.iter_mut().zip(needs) {
        f.attention = need;
    }
    if live.is_empty() {
        return Ok(facts);
    }
    let positions = crate::store::queue::positions_of_threads(conn, &ids)?;
    let unreachable = match hosts {
        crate::store::facts::HostCheck::Look => crate::store::hosts::unreachable_of(conn, &ids)?,
        crate::store::facts::HostCheck::OneHost => vec![None; ids.len()],
    };
    for ((at, position), unreachable) in live.into_iter().zip(positions).zip(unreachable) {
        facts[at].queue_position = position;
        facts[at].unreachable = unreachable;
    }
    Ok(facts)
}

fn find(conn: &Conn, id: &WorkerId) -> Result<Option<Worker>> {
    let Some(mut w) = workers::worker_by_id(conn, id)?.map(Worker::from) else {
        return Ok(None);
    };
    w.facts.queue_position = queued_at(conn, &w)?;
    Ok(Some(w))
}

/// A live worker's place in the queue (`THREADBASE_QUEUE=1`), `None` when it is not waiting.
fn queued_at(conn: &Conn, w: &Worker) -> Result<Option<i64>> {
    if w.facts.status != crate::domain::ThreadStatus::Live {
        return Ok(None);
    }
    crate::store::queue::position(conn, w.id())
}

fn load(e: &Engine, id: &WorkerId) -> Result<Worker> {
    find(&e.store.read()?, id)?.ok_or_else(|| unknown(id))
}

fn unknown(id: &WorkerId) -> Error {
    Error::new(
        ErrorCode::UnknownReference,
        format!(
            "Unknown managed worker: {}. Repair: pass a workerID returned by threads_spawn or listed by threads_list.",
            crate::paths::json_quote(id.as_str())
        ),
    )
}

/// The stored facts are those of the original worker: top level, and its id is the identity
/// of its own (coordinator, key).
fn check_original(row: &Worker) -> Result<()> {
    let f = &row.facts;
    if row.parent_path.is_some()
        || f.coordinator_id.as_str().is_empty()
        || worker_identity(&f.coordinator_id, &f.key) != f.worker_id
    {
        return Err(Error::forbidden(format!(
            "Not the original managed worker: {}. Repair: address workers by the workerID threads_spawn returned.",
            f.worker_id
        )));
    }
    Ok(())
}

/// `owned`: the original worker, controlled by its own coordinator only.
fn owned(e: &Engine, id: &WorkerId) -> Result<Worker> {
    let row = load(e, id)?;
    check_original(&row)?;
    if row.facts.coordinator_id != e.cfg.session_id {
        return Err(Error::forbidden(format!(
            "Only the owning coordinator may control this worker. Repair: call this from the session that spawned {} (coordinator {}); this session is {}.",
            row.id(),
            row.facts.coordinator_id,
            e.cfg.session_id
        )));
    }
    Ok(row)
}

/// Records how a worker's last run ended, in its own transaction.
fn set_outcome(store: &Store, id: &ThreadId, outcome: Outcome) -> Result<()> {
    store.write(|tx| workers::set_outcome(tx, id, outcome))
}
