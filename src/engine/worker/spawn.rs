//! `threads_spawn`: every check (role, directory, grants, agent profile) before any write,
//! then one transaction that finds the worker (same fingerprint) or counts slots, reserves
//! its row and admits its initial prompt; `drive` brings it up afterwards.

use serde_json::Value;

use super::drive::drive;
use super::{answer_worker, load};
use crate::contract::args as argpolicy;
use crate::contract::worker::{
    self as contract, check_directory, fingerprint, new_message_id, resolve_granted_paths,
    worker_identity, worker_prompt, SpawnRequest,
};
use crate::domain::SessionId;
use crate::engine::Engine;
use crate::error::{Error, ErrorCode, Result};
use crate::store::mailbox::{self, Direction, MailKind, NewMail};
use crate::store::threads::{upsert_manager, Contract, ManagerSpec};
use crate::store::workers::{self, NewWorker};
use crate::time::now_iso;

/// The mailbox `send_key` of a worker's initial prompt. User send keys are stored as
/// `send:<key>` and the report as `report`, so no key a caller chooses can collide.
const INITIAL_SEND_KEY: &str = "spawn";

/// Native children (`PI_THREADS_SELF_ID`) and managed workers cannot spawn.
fn check_may_spawn(e: &Engine, caller: &SessionId) -> Result<()> {
    let is_worker = workers::is_worker(&e.store.read()?, caller)?;
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

pub(in crate::engine) async fn spawn(
    e: &Engine,
    req: SpawnRequest,
) -> Result<crate::engine::Reply> {
    let coordinator = e.cfg.session_id.clone();
    check_may_spawn(e, &coordinator)?;
    check_directory(&req.directory)?;
    let paths = resolve_granted_paths(req.paths.as_deref())?;
    let args = match &req.agent {
        Some(a) => agent_profile(e, a)?,
        None => Vec::new(),
    };
    let inherited = argpolicy::inherited_args(&e.cfg.parent_args, &e.cfg.cwd);
    let model = contract::model_from_args(&argpolicy::merge_args(&inherited, &args)?)
        .as_ref()
        .map(Value::to_string);
    let worker_id = worker_identity(&coordinator, &req.key);
    let thread_id = worker_id.thread_id();
    let fp = fingerprint(
        &req.title,
        &req.directory,
        &req.task,
        req.agent.as_deref(),
        paths.as_deref(),
    );
    let limit = e.cfg.settings.max_workers;
    let prompt = worker_prompt(&req.task, &req.directory, paths.as_deref());
    let owner = e.rt.owner();
    let session_file = e.cfg.session_file.as_ref().map(|p| p.display().to_string());
    let manager_cwd = e.cfg.cwd.display().to_string();
    // Issue 48: with THREADBASE_ISOLATION=worktree, a new worker runs in a git worktree of
    // its own (named by its key); an existing worker keeps the one it has.
    let isolation = crate::engine::isolation::prepare(
        e.cfg.settings.isolation,
        std::path::Path::new(&req.directory),
    )?;
    // Its result says why it runs without a worktree (`isolationNote`).
    let note = isolation.note();
    let plan = isolation.plan(&thread_id, &req.key);
    let cwd = plan
        .as_ref()
        .map_or(req.directory.clone(), |p| p.cwd.display().to_string());
    // The prompt names the directory the worker works in.
    let prompt = match &plan {
        Some(_) => worker_prompt(&req.task, &cwd, paths.as_deref()),
        None => prompt,
    };
    // Until its child exists, an interrupt of the new worker waits for it.
    let _launching = e.rt.reserve_launch(&thread_id);
    let queued = e.store.write(|tx| {
        if let Some(stored) = workers::identity(tx, &worker_id)? {
            if stored.coordinator_id.as_ref() != Some(&coordinator)
                || stored.fingerprint.as_deref() != Some(fp.as_str())
            {
                return Err(Error::conflict(format!(
                    "This spawn key already belongs to a different request (worker {worker_id}). Repair: retry with the identical title, directory, task, agent and paths, or use a new key for different work."
                )));
            }
            return Ok((false, false));
        }
        crate::engine::budget::check_budget(e, tx, None, "threads_spawn")?;
        let used = workers::slots_used(tx, &coordinator)?;
        // THREADBASE_QUEUE=1: over the limit the worker is queued instead (below).
        let over = used >= limit;
        if over && !e.cfg.settings.queue {
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
        let queued = e.cfg.settings.queue
            && (over || !crate::store::queue::waiting(tx, manager_id)?.is_empty());
        let initial_message_id = new_message_id();
        let now = now_iso();
        workers::insert_worker(
            tx,
            &NewWorker {
                id: &worker_id,
                manager_id,
                title: &req.title,
                cwd: &cwd,
                args: &args,
                coordinator_id: &coordinator,
                spawn_key: &req.key,
                fingerprint: &fp,
                agent: req.agent.as_deref(),
                granted_paths: paths.as_deref(),
                model: model.as_deref(),
                initial_message_id: &initial_message_id,
                report_message_id: &new_message_id(),
                now: &now,
            },
        )?;
        // Held by this serve from its reservation: a serve of the same coordinator on
        // another host (or this one) spawning the same key at this moment finds it held and
        // leaves its launch to this one (`drive`).
        crate::store::threads::set_owner(tx, &thread_id, owner)?;
        if let Some(plan) = &plan {
            crate::engine::isolation::record(tx, &thread_id, plan)?;
        }
        mailbox::insert(
            tx,
            &NewMail {
                thread_id: &thread_id,
                direction: Direction::ToChild,
                kind: MailKind::Prompt,
                send_key: INITIAL_SEND_KEY,
                message_id: Some(&initial_message_id),
                body: &prompt,
                recipient: None,
                at: &now,
                delivered: false,
            },
        )?;
        if queued {
            crate::store::queue::mark(tx, &thread_id, &now)?;
        }
        Ok((queued, true))
    })?;
    let (queued, new) = queued;
    // The worktree is made now, queued or not: a queued worker launches later in its cwd.
    if let (true, Some(plan)) = (new, &plan) {
        if let Err(err) = crate::engine::isolation::create(e, &thread_id, plan) {
            e.store.write(|tx| {
                crate::store::launches::close_unlaunched(tx, &thread_id, &err.message).map(drop)
            })?;
            return Err(err);
        }
    }
    // A queued worker is brought up when a slot frees (`engine/queue.rs`); its prompt waits in
    // its mailbox meanwhile.
    if !queued {
        drive(e, &worker_id).await?;
    }
    e.rt.flush().await;
    let mut facts = load(e, &worker_id)?.facts;
    facts.isolation_note = note;
    answer_worker(facts)
}
