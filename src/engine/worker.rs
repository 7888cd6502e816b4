//! Contract C's worker tools (`threads_*`) and RPC (`threads.snapshot`, `threads.restore`),
//! one function per method, on top of the store and the runtime.
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

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::{named_params, Connection, OptionalExtension, Row};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::Engine;
use crate::contract::args as argpolicy;
use crate::contract::worker::{
    self as contract, check_directory, fingerprint, new_message_id, report_notice_text,
    resolve_granted_paths, send_message_id, worker_identity, worker_prompt, Model, Report,
    Reported, Sent, SpawnRequest, WorkerFacts, WorkerRequest, Workers,
};
use crate::contract::ToolResult;
use crate::error::{Error, ErrorCode, Result};
use crate::output::Reply;
use crate::runtime::mapping::Phase;
use crate::runtime::process::ProcessIdentity;
use crate::runtime::{ChildView, LaunchSpec, Runtime, SendMode, StartKind};
use crate::store::threads::{upsert_manager, Contract, ManagerSpec};
use crate::store::Store;
use crate::time::now_iso;

/// The mailbox `send_key` of a worker's initial prompt. User send keys are stored as
/// `send:<key>` and the report as `report`, so no key a caller chooses can collide.
const INITIAL_SEND_KEY: &str = "spawn";
const REPORT_SEND_KEY: &str = "report";
/// How long `threads_interrupt` waits for the aborted run to be recorded.
const INTERRUPT_SETTLE: Duration = Duration::from_millis(3_000);
/// RPC timeout of the abort a `threads_interrupt` sends.
const ABORT_TIMEOUT: Duration = Duration::from_millis(5_000);
/// How long an unanswered initial prompt waits to see whether the child is closing.
const CLOSE_SETTLE: Duration = Duration::from_millis(2_000);

/// Per-worker locks: launches and deliveries of one worker never overlap in this process.
static LOCKS: LazyLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> =
    LazyLock::new(Default::default);
/// Workers whose current run `threads_interrupt` is aborting; the monitor records the run as
/// interrupted and removes the entry.
static INTERRUPTING: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Default::default);

fn worker_lock(id: &str) -> Arc<tokio::sync::Mutex<()>> {
    LOCKS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(id.to_string())
        .or_default()
        .clone()
}

fn interrupting() -> std::sync::MutexGuard<'static, HashSet<String>> {
    INTERRUPTING.lock().unwrap_or_else(|p| p.into_inner())
}

/// `THREADBASE_MAX_WORKERS` (1..32, default 4), read once; an invalid value warns once.
pub fn max_workers() -> i64 {
    static MAX: OnceLock<i64> = OnceLock::new();
    *MAX.get_or_init(|| {
        max_workers_from(
            std::env::var("THREADBASE_MAX_WORKERS").ok().as_deref(),
            &mut |w| eprintln!("{w}"),
        )
    })
}

fn max_workers_from(value: Option<&str>, warn: &mut dyn FnMut(String)) -> i64 {
    let Some(raw) = value.filter(|v| !v.is_empty()) else {
        return contract::DEFAULT_MAX_WORKERS;
    };
    let (lo, hi) = contract::MAX_WORKERS_RANGE;
    let t = raw.trim();
    match t.parse::<i64>() {
        Ok(n) if t.bytes().all(|b| b.is_ascii_digit()) && (lo..=hi).contains(&n) => n,
        _ => {
            warn(format!(
                "[threadbase] Ignoring invalid THREADBASE_MAX_WORKERS={} (expected an integer from {lo} to {hi}); using default {}.",
                crate::paths::json_quote(raw),
                contract::DEFAULT_MAX_WORKERS
            ));
            contract::DEFAULT_MAX_WORKERS
        }
    }
}

/// A result's JSON text, written once: a tool answers with it as its text content and as its
/// details.
type Json = Box<RawValue>;

fn json_of(result: &impl Serialize) -> Result<Json> {
    Ok(serde_json::value::to_raw_value(result)?)
}

pub(super) async fn run(e: &Engine, method: &str, req: WorkerRequest) -> Result<Reply> {
    let value = match req {
        WorkerRequest::Spawn(r) => spawn(e, r).await?,
        WorkerRequest::List => list(e)?,
        WorkerRequest::Send {
            worker_id,
            key,
            text,
        } => send(e, &worker_id, &key, &text).await?,
        WorkerRequest::Interrupt { worker_id } => interrupt(e, &worker_id).await?,
        WorkerRequest::Hide { worker_id } => hide(e, &worker_id)?,
        WorkerRequest::Report(r) => report(e, r)?,
        WorkerRequest::Snapshot { coordinator_ids } => {
            let facts = snapshot_workers(&*e.store.read()?, &coordinator_ids)?;
            return Reply::json(&Workers::of(&facts));
        }
        WorkerRequest::Restore { coordinator_ids } => {
            let facts = restore_workers(&e.store, &coordinator_ids)?;
            return Reply::json(&Workers::of(&facts));
        }
    };
    debug_assert!(method.starts_with("threads_"));
    // Tools answer like every tool on serve: the JSON as text content, the value as details.
    Reply::json(&ToolResult::new(value.get(), &*value))
}

// ---- rows ---------------------------------------------------------------------------------

/// A worker row as this module reads it (`sql/worker_by_id.sql` and friends).
#[derive(Debug, Clone)]
struct WorkerRow {
    facts: WorkerFacts,
    /// The agent profile's Pi args.
    args: Vec<String>,
    session_file: Option<String>,
    owner: Option<ProcessIdentity>,
    report_message_id: Option<String>,
    parent_path: Option<String>,
}

impl WorkerRow {
    fn id(&self) -> &str {
        &self.facts.worker_id
    }

    fn from_row(r: &Row<'_>) -> rusqlite::Result<Self> {
        let args: String = r.get(8)?;
        let model: Option<String> = r.get(7)?;
        let owner_pid: Option<i64> = r.get(14)?;
        let owner_started: Option<i64> = r.get(15)?;
        let verdict: Option<String> = r.get(20)?;
        let report = match verdict {
            Some(verdict) => {
                let evidence: String = r.get(22)?;
                Some(Report {
                    verdict,
                    summary: r.get(21)?,
                    evidence: serde_json::from_str(&evidence).unwrap_or_default(),
                })
            }
            None => None,
        };
        let hidden: Option<bool> = r.get(10)?;
        Ok(WorkerRow {
            facts: WorkerFacts {
                worker_id: r.get(0)?,
                coordinator_id: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                key: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                title: r.get(4)?,
                directory: r.get(5)?,
                agent: r.get(6)?,
                model: model
                    .as_deref()
                    .and_then(|m| serde_json::from_str::<Model>(m).ok()),
                outcome: r.get(9)?,
                report,
                hidden_override: hidden,
                status: r.get(11)?,
                phase: r.get(12)?,
            },
            args: serde_json::from_str(&args).unwrap_or_default(),
            session_file: r.get(13)?,
            owner: owner_pid.map(|pid| ProcessIdentity {
                pid,
                started_at: owner_started.unwrap_or(-1),
            }),
            report_message_id: r.get(17)?,
            parent_path: r.get(18)?,
        })
    }
}

fn find(conn: &Connection, id: &str) -> Result<Option<WorkerRow>> {
    Ok(conn
        .prepare_cached(include_str!("../../sql/worker_by_id.sql"))?
        .query_row([id], WorkerRow::from_row)
        .optional()?)
}

fn load(e: &Engine, id: &str) -> Result<WorkerRow> {
    find(&*e.store.read()?, id)?.ok_or_else(|| unknown(id))
}

fn unknown(id: &str) -> Error {
    Error::new(
        ErrorCode::UnknownReference,
        format!(
            "Unknown managed worker: {}. Repair: pass a workerID returned by threads_spawn or listed by threads_list.",
            crate::paths::json_quote(id)
        ),
    )
}

/// The stored facts are those of the original worker: top level, and its id is the identity
/// of its own (coordinator, key).
fn check_original(row: &WorkerRow) -> Result<()> {
    let f = &row.facts;
    if row.parent_path.is_some()
        || f.coordinator_id.is_empty()
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
fn owned(e: &Engine, id: &str) -> Result<WorkerRow> {
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

fn query_rows(conn: &Connection, sql: &str, param: &str) -> Result<Vec<WorkerRow>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map([param], WorkerRow::from_row)?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

/// `threads.snapshot`: the facts of the given coordinators' workers (hidden ones included),
/// oldest first, in one query. Read-only; usable from any process holding the database.
pub fn snapshot_workers(conn: &Connection, coordinator_ids: &[String]) -> Result<Vec<WorkerFacts>> {
    let ids = serde_json::to_string(coordinator_ids)?;
    Ok(facts_of(query_rows(
        conn,
        include_str!("../../sql/workers_of_coordinators.sql"),
        &ids,
    )?))
}

fn facts_of(rows: Vec<WorkerRow>) -> Vec<WorkerFacts> {
    rows.into_iter().map(|r| r.facts).collect()
}

/// `threads.restore`: gives every hidden worker of the given coordinators the hidden override
/// `false` (even a PASS worker shows again), then returns their facts, in one transaction.
pub fn restore_workers(store: &Store, coordinator_ids: &[String]) -> Result<Vec<WorkerFacts>> {
    let ids = serde_json::to_string(coordinator_ids)?;
    store.write(|tx| {
        tx.prepare_cached(include_str!("../../sql/workers_restore_hidden.sql"))?
            .execute((&ids, now_iso()))?;
        Ok(facts_of(query_rows(
            tx,
            include_str!("../../sql/workers_of_coordinators.sql"),
            &ids,
        )?))
    })
}

// ---- spawn ----------------------------------------------------------------------------------

/// Native children (`PI_THREADS_SELF_ID`) and managed workers cannot spawn.
fn check_may_spawn(e: &Engine, caller: &str) -> Result<()> {
    let is_worker: bool = e
        .store
        .read()?
        .prepare_cached(include_str!("../../sql/worker_caller_is_worker.sql"))?
        .query_row([caller], |r| r.get(0))?;
    if e.cfg.self_id.is_some() || is_worker {
        return Err(Error::forbidden(
            "Native subagents and managed workers cannot spawn managed workers. Repair: do the work in this session, or report back and let the coordinator spawn the worker.",
        ));
    }
    Ok(())
}

/// The Pi args of the agent profile `<agent dir>/agents/<agent>.json` (`{"args": [...]}`,
/// allowlisted child args only).
fn agent_profile(e: &Engine, agent: &str) -> Result<Vec<String>> {
    let quoted = crate::paths::json_quote(agent);
    let dir = e.cfg.agent_dir.join("agents");
    if agent.contains(['/', '\\', '\0']) || agent == "." || agent == ".." {
        return Err(Error::invalid(format!(
            "Unknown agent {quoted}: an agent ID names a profile file in {} and cannot contain '/' or '\\' or be '.' or '..'. Repair: pass the ID of a profile there, or omit agent so the worker inherits the coordinator's agent and model.",
            dir.display()
        )));
    }
    let path = dir.join(format!("{agent}.json"));
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::invalid(format!(
                "Unknown agent {quoted}: no profile at {}. Repair: create it holding {{\"args\": [\"--model\", \"provider/model\"]}} (allowlisted Pi flags), or omit agent so the worker inherits the coordinator's agent and model.",
                path.display()
            )))
        }
        Err(err) => {
            return Err(Error::io(format!(
                "Cannot read the profile of agent {quoted} at {}: {err}. Repair: make the file readable.",
                path.display()
            )))
        }
    };
    let bad = |why: String| {
        Error::invalid(format!(
            "The profile of agent {quoted} at {} is invalid: {why}. Repair: make it a JSON object {{\"args\": [\"--model\", \"provider/model\"]}} with allowlisted Pi flags only.",
            path.display()
        ))
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let Some(obj) = value.as_object() else {
        return Err(bad("not a JSON object".into()));
    };
    if let Some(k) = obj.keys().find(|k| *k != "args") {
        return Err(bad(format!("unexpected field {k}")));
    }
    let args: Vec<String> = match obj.get("args") {
        None => Vec::new(),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect(),
        Some(_) => return Err(bad("args must be an array of strings".into())),
    };
    argpolicy::validate_child_args(&args).map_err(|err| bad(err.message))?;
    Ok(args)
}

async fn spawn(e: &Engine, req: SpawnRequest) -> Result<Json> {
    let coordinator = e.cfg.session_id.clone();
    check_may_spawn(e, &coordinator)?;
    check_directory(&req.directory)?;
    let paths = resolve_granted_paths(req.paths.as_deref())?;
    let args = match &req.agent {
        Some(a) => agent_profile(e, a)?,
        None => Vec::new(),
    };
    let inherited = argpolicy::inherited_args(&e.cfg.parent_args, &e.cfg.cwd);
    let model = contract::model_from_args(&argpolicy::merge_args(&inherited, &args)?);
    let worker_id = worker_identity(&coordinator, &req.key);
    let fp = fingerprint(
        &req.title,
        &req.directory,
        &req.task,
        req.agent.as_deref(),
        paths.as_deref(),
    );
    let limit = max_workers();
    let prompt = worker_prompt(&req.task, &req.directory, paths.as_deref());
    let owner = e.rt.owner();
    let session_file = e.cfg.session_file.as_ref().map(|p| p.display().to_string());
    let manager_cwd = e.cfg.cwd.display().to_string();
    // Until its child exists, an interrupt of the new worker waits for it.
    let _launching = e.rt.reserve_launch(&worker_id);
    e.store.write(|tx| {
        let existing: Option<(Option<String>, Option<String>)> = tx
            .prepare_cached(include_str!("../../sql/worker_identity.sql"))?
            .query_row([&worker_id], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if let Some((coord, stored_fp)) = existing {
            if coord.as_deref() != Some(coordinator.as_str()) || stored_fp.as_deref() != Some(fp.as_str()) {
                return Err(Error::conflict(format!(
                    "This spawn key already belongs to a different request (worker {worker_id}). Repair: retry with the identical title, directory, task, agent and paths, or use a new key for different work."
                )));
            }
            return Ok(());
        }
        e.check_budget(tx, None, "threads_spawn")?;
        let used: i64 = tx
            .prepare_cached(include_str!("../../sql/worker_slots_used.sql"))?
            .query_row([&coordinator], |r| r.get(0))?;
        if used >= limit {
            return Err(Error::new(
                ErrorCode::Limit,
                format!(
                    "Coordinator worker limit reached ({limit}). Repair: wait until a worker reports, or interrupt one (failed and interrupted workers free their slot; hidden and unreported workers keep it), or raise THREADBASE_MAX_WORKERS (1..32)."
                ),
            ));
        }
        let manager_id = upsert_manager(
            tx,
            &ManagerSpec {
                session_id: &coordinator,
                contract: Contract::Worker,
                scope_path: "/",
                depth: 0,
                self_thread_id: None,
                session_file: session_file.as_deref(),
                cwd: Some(&manager_cwd),
                owner_pid: Some(owner.pid),
                owner_started_at: Some(owner.started_at),
            },
        )?;
        let initial_message_id = new_message_id();
        let now = now_iso();
        tx.prepare_cached(include_str!("../../sql/worker_insert.sql"))?
            .execute(named_params! {
                ":id": worker_id,
                ":manager_id": manager_id,
                ":title": req.title,
                ":cwd": req.directory,
                ":args": serde_json::to_string(&args)?,
                ":coordinator_id": coordinator,
                ":spawn_key": req.key,
                ":fingerprint": fp,
                ":agent": req.agent,
                ":granted_paths": paths.as_ref().map(|p| json!(p).to_string()),
                ":model": model.as_ref().map(Value::to_string),
                ":initial_message_id": initial_message_id,
                ":report_message_id": new_message_id(),
                ":now": now,
            })?;
        tx.prepare_cached(include_str!("../../sql/worker_mailbox_admit.sql"))?
            .execute(named_params! {
                ":thread_id": worker_id,
                ":direction": "to_child",
                ":kind": "prompt",
                ":send_key": INITIAL_SEND_KEY,
                ":message_id": initial_message_id,
                ":body": prompt,
                ":now": now,
            })?;
        Ok(())
    })?;
    drive(e, &worker_id).await?;
    e.rt.flush().await;
    json_of(&load(e, &worker_id)?.facts.view())
}

// ---- bringing a worker up and delivering its messages ---------------------------------------

/// Makes sure the worker's process runs here (launching or relaunching it) and delivers its
/// pending messages in order. A worker whose process another live serve holds is left to it.
async fn drive(e: &Engine, id: &str) -> Result<()> {
    let lock = worker_lock(id);
    let _one_at_a_time = lock.lock().await;
    let row = load(e, id)?;
    if !e.rt.is_live(id) {
        let me = e.rt.owner();
        if row.facts.status == "live" && row.owner.is_some_and(|o| o != me && o.is_alive()) {
            return Ok(());
        }
        match launch(e, &row).await {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(err) => {
                // A worker whose process never started is closed as failed (frees its slot).
                e.store.write(|tx| {
                    tx.prepare_cached(include_str!("../../sql/thread_close_unlaunched.sql"))?
                        .execute((id, &err.message, now_iso()))?;
                    Ok(())
                })?;
                return Err(err);
            }
        }
    }
    deliver_pending(e, id).await
}

/// The environment of a worker's process: the `PI_THREADS_*` settings of this serve, but as a
/// top-level session (path `/root`, depth 0, no parent, its own root session), plus
/// `THREADBASE_WORKER_ID` and `THREADBASE_COORDINATOR_ID`. Empty values unset what this
/// process's own environment might carry.
fn worker_env(e: &Engine, id: &str, coordinator: &str) -> Vec<(String, String)> {
    let drop = [
        "PI_THREADS_SELF_ID",
        "PI_THREADS_PARENT_PATH",
        "PI_THREADS_PARENT_ID",
        "PI_THREADS_PARENT_THREAD_ID",
        "PI_THREADS_ROOT_SESSION_ID",
    ];
    let mut env: Vec<(String, String)> = e
        .child_env(id, crate::paths::ROOT, 0)
        .into_iter()
        .filter(|(k, _)| !drop.contains(&k.as_str()))
        .collect();
    for k in &drop[..4] {
        env.push((k.to_string(), String::new()));
    }
    env.push(("PI_THREADS_ROOT_SESSION_ID".into(), id.to_string()));
    env.push(("THREADBASE_WORKER_ID".into(), id.to_string()));
    env.push(("THREADBASE_COORDINATOR_ID".into(), coordinator.to_string()));
    env
}

struct Pending {
    id: i64,
    body: String,
}

fn pending_messages(e: &Engine, id: &str) -> Result<Vec<Pending>> {
    let conn = e.store.read()?;
    let mut stmt = conn.prepare_cached(include_str!("../../sql/worker_pending_messages.sql"))?;
    let rows = stmt.query_map([id], |r| {
        Ok(Pending {
            id: r.get(0)?,
            body: r.get(1)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}

fn mark_delivered(e: &Engine, message: i64) -> Result<()> {
    e.store.write(|tx| {
        tx.prepare_cached(include_str!("../../sql/worker_mailbox_delivered.sql"))?
            .execute((message, now_iso()))?;
        Ok(())
    })
}

fn set_outcome(store: &Store, id: &str, outcome: &str) -> Result<()> {
    store.write(|tx| {
        tx.prepare_cached(include_str!("../../sql/worker_set_outcome.sql"))?
            .execute((id, outcome, now_iso()))?;
        Ok(())
    })
}

/// Launches (fresh session file) or relaunches (saved session file) a worker's process. A
/// fresh worker starts with its first pending message as the prompt. Returns whether delivery
/// may go on (false when the child rejected that prompt).
async fn launch(e: &Engine, row: &WorkerRow) -> Result<bool> {
    let id = row.id().to_string();
    let cwd = PathBuf::from(&row.facts.directory);
    let saved = row
        .session_file
        .clone()
        .filter(|f| Path::new(f).exists())
        .map(PathBuf::from);
    let fresh = saved.is_none();
    let session = match saved {
        Some(f) => f,
        None => {
            let path = e
                .child_session_dir()
                .join(crate::pi::session::session_file_name(&now_iso(), &id));
            crate::pi::session::write_header_only(&path, &id, &cwd, None)?;
            e.store.write(|tx| {
                tx.prepare_cached(include_str!("../../sql/thread_set_session.sql"))?
                    .execute(named_params! {
                        ":file": path.display().to_string(), ":session_id": id, ":at": now_iso(), ":id": id,
                    })?;
                Ok(())
            })?;
            path
        }
    };
    let marks = e.store.write(|tx| {
        tx.prepare_cached(include_str!("../../sql/worker_keep_outcome.sql"))?
            .execute([&id])?;
        run_marks(tx, &id)
    })?;
    let first = if fresh {
        pending_messages(e, &id)?.into_iter().next()
    } else {
        None
    };
    let inherited = argpolicy::inherited_args(&e.cfg.parent_args, &e.cfg.cwd);
    let merged = argpolicy::merge_args(&inherited, &row.args)?;
    let approve = argpolicy::should_approve(e.cfg.trusted, &e.cfg.cwd, &cwd);
    let title = row
        .facts
        .title
        .clone()
        .unwrap_or_else(|| row.facts.key.clone());
    let argv =
        crate::pi::flags::child_argv(&e.cfg.pi_command, &merged, Some(&session), &title, approve);
    let launched =
        e.rt.launch(LaunchSpec {
            thread_id: id.clone(),
            argv,
            cwd,
            env: worker_env(e, &id, &row.facts.coordinator_id),
            clear_env: false,
            start: match &first {
                Some(m) => StartKind::Prompt(m.body.clone()),
                None => StartKind::Resumed,
            },
        })
        .await;
    let outcome = launched?;
    if let Some(view) = e.rt.watch(&id) {
        tokio::spawn(monitor(
            e.store.clone(),
            e.rt.clone(),
            id.clone(),
            view,
            marks,
        ));
    }
    let Some(first) = first else {
        return Ok(true);
    };
    // No answer: either the child is slow (the prompt sits in its input and counts as
    // delivered) or it closed before answering (the prompt stays pending).
    match outcome.prompt_accepted {
        Some(true) => mark_delivered(e, first.id)?,
        None if !closing(e, &id).await => mark_delivered(e, first.id)?,
        None => return Ok(false),
        Some(false) => {
            rejected(e, &id).await?;
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether the child is closing (or closed): a child whose pipes closed is recorded closed
/// within the pipe drain time, so this waits up to [`CLOSE_SETTLE`] for that.
async fn closing(e: &Engine, id: &str) -> bool {
    match e.rt.watch(id) {
        Some(mut view) => matches!(
            tokio::time::timeout(CLOSE_SETTLE, view.wait_for(|v| v.closed)).await,
            Ok(Ok(_))
        ),
        None => true,
    }
}

/// A message the child refused: a run that could not start is `failed` (unless the refusal
/// was the child closing, which its monitor records).
async fn rejected(e: &Engine, id: &str) -> Result<()> {
    if !closing(e, id).await {
        set_outcome(&e.store, id, "failed")?;
    }
    Ok(())
}

/// Sends every pending message of a live worker in order: `prompt` when it is idle, else
/// `follow_up`. Stops at the first rejection (the message stays pending).
async fn deliver_pending(e: &Engine, id: &str) -> Result<()> {
    for m in pending_messages(e, id)? {
        if !e.rt.is_live(id) {
            break;
        }
        let idle =
            e.rt.watch(id)
                .is_some_and(|v| v.borrow().phase == Phase::Idle);
        let mode = if idle {
            SendMode::Prompt
        } else {
            SendMode::FollowUp
        };
        let sent = e.rt.send(id, mode, &m.body).await?;
        match sent.accepted {
            // Accepted, or written and not answered in time: the child has it in its input.
            Some(true) | None => mark_delivered(e, m.id)?,
            Some(false) => {
                rejected(e, id).await?;
                break;
            }
        }
    }
    Ok(())
}

// ---- run outcomes ---------------------------------------------------------------------------

/// Where a monitor's bookkeeping stands: the last event seq and interrupt command id seen.
#[derive(Debug, Clone, Copy)]
struct Marks {
    seq: i64,
    command: i64,
}

fn run_marks(conn: &Connection, id: &str) -> Result<Marks> {
    Ok(conn
        .prepare_cached(include_str!("../../sql/worker_run_marks.sql"))?
        .query_row([id], |r| {
            Ok(Marks {
                seq: r.get(0)?,
                command: r.get(1)?,
            })
        })?)
}

/// Events after `marks`: (newest seq, a run happened, a run errored), and the newest
/// interrupt command id.
fn activity_since(store: &Store, id: &str, marks: Marks) -> Result<(i64, bool, bool, i64)> {
    let conn = store.read()?;
    let (seq, active, errored) = conn
        .prepare_cached(include_str!("../../sql/worker_activity_since.sql"))?
        .query_row((id, marks.seq), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    let now = run_marks(&conn, id)?;
    Ok((seq, active, errored, now.command))
}

/// Watches one launch of a worker and records how each run ends (see the module docs).
async fn monitor(
    store: Arc<Store>,
    rt: Runtime,
    id: String,
    mut view: watch::Receiver<ChildView>,
    mut marks: Marks,
) {
    let mut in_run = false;
    loop {
        let (phase, closed) = {
            let v = view.borrow_and_update();
            (v.phase, v.closed)
        };
        if closed {
            break;
        }
        match phase {
            Phase::Busy => in_run = true,
            Phase::Idle => {
                rt.flush().await;
                match activity_since(&store, &id, marks) {
                    Ok((seq, active, errored, command)) if in_run || active => {
                        let aborted = interrupting().contains(&id) || command > marks.command;
                        let outcome = if aborted {
                            "interrupted"
                        } else if errored {
                            "failed"
                        } else {
                            "succeeded"
                        };
                        learn_model(&store, &id);
                        if let Err(err) = set_outcome(&store, &id, outcome) {
                            tracing::error!("recording the outcome of {id} failed: {err}");
                        }
                        interrupting().remove(&id);
                        marks = Marks { seq, command };
                        in_run = false;
                    }
                    Ok(_) => {}
                    Err(err) => tracing::error!("reading the activity of {id} failed: {err}"),
                }
            }
            Phase::Starting | Phase::Stopping => {}
        }
        if view.changed().await.is_err() {
            break;
        }
    }
    rt.flush().await;
    if let Err(err) = record_close(&store, &id, marks, in_run) {
        tracing::error!("recording the outcome of {id} failed: {err}");
    }
    interrupting().remove(&id);
}

/// A worker whose args name no model learns it from its session file after a run: the last
/// `model_change` entry or assistant message with `provider` and `modelId`/`model`.
fn learn_model(store: &Store, id: &str) {
    let source: Option<(bool, Option<String>)> = store.read().ok().and_then(|conn| {
        conn.prepare_cached(include_str!("../../sql/worker_model_source.sql"))
            .ok()?
            .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .ok()
    });
    let Some((false, Some(file))) = source else {
        return;
    };
    let Ok(text) = std::fs::read_to_string(&file) else {
        return;
    };
    let model = text
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|entry| {
            let (provider, model) = match entry["type"].as_str() {
                Some("model_change") => (&entry["provider"], &entry["modelId"]),
                Some("message") if entry["message"]["role"] == "assistant" => {
                    (&entry["message"]["provider"], &entry["message"]["model"])
                }
                _ => return None,
            };
            Some(json!({"providerID": provider.as_str()?, "id": model.as_str()?}))
        });
    if let Some(model) = model {
        let _ = store.write(|tx| {
            tx.prepare_cached(include_str!("../../sql/worker_set_model.sql"))?
                .execute((id, model.to_string()))?;
            Ok(())
        });
    }
}

/// The process closed: a run in progress ends `interrupted` (`failed` for a failed exit or an
/// errored run); a failed exit while idle is `failed`; otherwise the last outcome stands.
fn record_close(store: &Store, id: &str, marks: Marks, in_run: bool) -> Result<()> {
    let (_, active, errored, _) = activity_since(store, id, marks)?;
    let (status, exit_kind): (String, Option<String>) = store
        .read()?
        .prepare_cached(include_str!("../../sql/worker_run_marks.sql"))?
        .query_row([id], |r| Ok((r.get(2)?, r.get(3)?)))?;
    if status != "closed" {
        return Ok(());
    }
    let failed_exit = exit_kind.as_deref() == Some("failed");
    let outcome = if in_run || active {
        if failed_exit || errored {
            "failed"
        } else {
            "interrupted"
        }
    } else if failed_exit {
        "failed"
    } else {
        return Ok(());
    };
    set_outcome(store, id, outcome)
}

// ---- list, send, interrupt, hide ------------------------------------------------------------

fn list(e: &Engine) -> Result<Json> {
    let rows = query_rows(
        &*e.store.read()?,
        include_str!("../../sql/workers_of_coordinator.sql"),
        &e.cfg.session_id,
    )?;
    json_of(&Workers::of(rows.iter().map(|r| &r.facts)))
}

async fn send(e: &Engine, worker_id: &str, key: &str, text: &str) -> Result<Json> {
    let row = owned(e, worker_id)?;
    let id = row.id().to_string();
    let message_id = send_message_id(&id, key);
    let send_key = format!("send:{key}");
    e.store.write(|tx| {
        let admitted = tx
            .prepare_cached(include_str!("../../sql/worker_mailbox_admit.sql"))?
            .execute(named_params! {
                ":thread_id": id,
                ":direction": "to_child",
                ":kind": "follow_up",
                ":send_key": send_key,
                ":message_id": message_id,
                ":body": text,
                ":now": now_iso(),
            })?;
        if admitted > 0 {
            // A new message is new work (an identical retry is not); refused, it is rolled back.
            e.check_budget(tx, Some(&id), "threads_send")?;
        } else {
            let (_, body): (Option<String>, String) = tx
                .prepare_cached(include_str!("../../sql/worker_mailbox_by_key.sql"))?
                .query_row((&id, &send_key), |r| Ok((r.get(0)?, r.get(1)?)))?;
            if body != text {
                return Err(Error::conflict(format!(
                    "This send key already belongs to different text (message {message_id}). Repair: resend the identical text to retry, or use a new key for a new message."
                )));
            }
        }
        tx.prepare_cached(include_str!("../../sql/worker_unhide_after_send.sql"))?
            .execute((&id, now_iso()))?;
        Ok(())
    })?;
    drive(e, &id).await?;
    e.rt.flush().await;
    json_of(&Sent {
        worker_id: &id,
        message_id: &message_id,
    })
}

async fn interrupt(e: &Engine, worker_id: &str) -> Result<Json> {
    let row = owned(e, worker_id)?;
    let id = row.id().to_string();
    e.rt.await_launch(&id, crate::runtime::LAUNCH_WAIT).await;
    if e.rt.is_live(&id) {
        let running =
            e.rt.watch(&id)
                .is_some_and(|v| v.borrow().phase != Phase::Idle);
        if running {
            interrupting().insert(id.clone());
        }
        let _ = e.rt.abort(&id, ABORT_TIMEOUT).await;
        if running {
            let deadline = Instant::now() + INTERRUPT_SETTLE;
            while interrupting().contains(&id) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            interrupting().remove(&id);
        }
    } else if row.facts.status == "live"
        && row.owner.is_some_and(|o| o != e.rt.owner() && o.is_alive())
    {
        // Another serve holds the pipes: ask it through a command row (its watcher aborts).
        e.store.write(|tx| {
            tx.prepare_cached(include_str!("../../sql/worker_interrupt_command.sql"))?
                .execute((&id, now_iso()))?;
            Ok(())
        })?;
    }
    e.rt.flush().await;
    json_of(&load(e, &id)?.facts.view())
}

fn hide(e: &Engine, worker_id: &str) -> Result<Json> {
    let row = owned(e, worker_id)?;
    e.store.write(|tx| {
        tx.prepare_cached(include_str!("../../sql/worker_set_hidden.sql"))?
            .execute((row.id(), true, now_iso()))?;
        Ok(())
    })?;
    json_of(&load(e, row.id())?.facts.view())
}

// ---- report ---------------------------------------------------------------------------------

fn report(e: &Engine, report: Report) -> Result<Json> {
    let caller = &e.cfg.session_id;
    let row = find(&*e.store.read()?, caller)?.ok_or_else(|| {
        Error::forbidden(format!(
            "Only a managed worker can call threads_report, and this session ({caller}) is not one. Repair: report from inside a worker started with threads_spawn; a coordinator reads reports with threads_list."
        ))
    })?;
    check_original(&row)?;
    let id = row.id().to_string();
    let message_id = row.report_message_id.clone().unwrap_or_else(new_message_id);
    let notice = report_notice_text(&id, &row.facts.key, &report);
    let stored = e.store.write(|tx| {
        let existing: Option<(String, String, String)> = tx
            .prepare_cached(include_str!("../../sql/worker_report.sql"))?
            .query_row([&id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?;
        if let Some((verdict, summary, evidence)) = existing {
            let original = Report {
                verdict,
                summary,
                evidence: serde_json::from_str(&evidence).unwrap_or_default(),
            };
            if original != report {
                return Err(Error::conflict(
                    "This worker already has a different report. Start a new task with a new spawn key. Repair: repeat the identical report to read it back, or ask the coordinator to spawn a new worker.",
                ));
            }
            return Ok(original);
        }
        let now = now_iso();
        tx.prepare_cached(include_str!("../../sql/worker_report_insert.sql"))?
            .execute((
                &id,
                &report.verdict,
                &report.summary,
                json!(report.evidence).to_string(),
                &message_id,
                &now,
            ))?;
        tx.prepare_cached(include_str!("../../sql/worker_mailbox_admit.sql"))?
            .execute(named_params! {
                ":thread_id": id,
                ":direction": "to_parent",
                ":kind": "report",
                ":send_key": REPORT_SEND_KEY,
                ":message_id": message_id,
                ":body": notice,
                ":now": now,
            })?;
        Ok(report)
    })?;
    json_of(&Reported {
        worker_id: &id,
        report: &stored,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_workers_setting() {
        let mut warnings = Vec::new();
        let mut warn = |w: String| warnings.push(w);
        assert_eq!(max_workers_from(None, &mut warn), 4);
        assert_eq!(max_workers_from(Some(""), &mut warn), 4);
        assert_eq!(max_workers_from(Some("1"), &mut warn), 1);
        assert_eq!(max_workers_from(Some(" 32 "), &mut warn), 32);
        assert_eq!(max_workers_from(Some("0"), &mut warn), 4);
        assert_eq!(max_workers_from(Some("33"), &mut warn), 4);
        assert_eq!(max_workers_from(Some("-1"), &mut warn), 4);
        assert_eq!(max_workers_from(Some("2.5"), &mut warn), 4);
        assert_eq!(warnings.len(), 4);
        assert!(warnings[0].contains("THREADBASE_MAX_WORKERS=\"0\""));
    }
}
