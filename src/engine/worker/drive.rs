//! Bringing a worker up and delivering its messages, shared by spawn and send: under a
//! per-worker lock, launch (or relaunch) the process here unless another live serve holds it,
//! then send the pending messages in order, each marked delivered once the child has it.

use crate::domain::ThreadStatus;
use crate::domain::{SessionId, ThreadId, WorkerId};
use crate::engine::child_env::{ChildEnv, Parent};
use std::path::{Path, PathBuf};

use std::time::Duration;

use super::monitor::monitor;
use super::{load, set_outcome, Worker};
use crate::contract::args as argpolicy;
use crate::engine::Engine;
use crate::error::Result;
use crate::runtime::mapping::Phase;
use crate::runtime::{LaunchSpec, SendMode, StartKind};
use crate::store::launches;
use crate::store::workers::{self, Outcome, PendingMessage};
use crate::time::now_iso;

/// How long an unanswered initial prompt waits to see whether the child is closing.
const CLOSE_SETTLE: Duration = Duration::from_millis(2_000);

/// Makes sure the worker's process runs here (launching or relaunching it) and delivers its
/// pending messages in order. A worker whose process another live serve holds is left to it.
pub(in crate::engine) async fn drive(e: &Engine, id: &WorkerId) -> Result<()> {
    let thread = id.thread_id();
    let _one_at_a_time = e.locks.lock(&thread).await;
    let row = load(e, id)?;
    if !e.rt.is_live(&thread) {
        let me = e.rt.owner();
        if row.facts.status == ThreadStatus::Live
            && crate::identity::holder(row.owner, me).elsewhere().is_some()
        {
            return Ok(());
        }
        match launch(e, &row).await {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(err) => {
                // A worker whose process never started is closed as failed (frees its slot).
                e.store
                    .write(|tx| launches::close_unlaunched(tx, &thread, &err.message))?;
                return Err(err);
            }
        }
    }
    deliver_pending(e, &thread).await
}

/// The environment of a worker's process: the `PI_THREADS_*` settings of this serve, but as a
/// top-level session (path `/root`, depth 0, no parent, its own root session), plus
/// `THREADBASE_WORKER_ID` and `THREADBASE_COORDINATOR_ID`.
fn worker_env(e: &Engine, id: &WorkerId, coordinator: &SessionId) -> Vec<(String, String)> {
    ChildEnv::new(
        &e.cfg,
        None,
        crate::paths::ROOT,
        0,
        Parent::TopLevel,
        &id.session_id(),
    )
    .thread_settings(&e.cfg.settings)
    .worker(id, coordinator)
    .into_vec()
}

fn pending_messages(e: &Engine, id: &ThreadId) -> Result<Vec<PendingMessage>> {
    workers::pending_messages(&e.store.read()?, id)
}

fn mark_delivered(e: &Engine, message: i64) -> Result<()> {
    e.store.write(|tx| workers::mark_delivered(tx, message))
}

/// Launches (fresh session file) or relaunches (saved session file) a worker's process. A
/// fresh worker starts with its first pending message as the prompt. Returns whether delivery
/// may go on (false when the child rejected that prompt).
async fn launch(e: &Engine, row: &Worker) -> Result<bool> {
    let id = row.id();
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
            // A worker is a top-level Pi session whose id is its workerID.
            let session_id = row.facts.worker_id.session_id();
            let path = e
                .child_session_dir()
                .join(crate::pi::session::session_file_name(
                    &now_iso(),
                    session_id.as_str(),
                ));
            crate::pi::session::write_header_only(&path, session_id.as_str(), &cwd, None)?;
            e.store.write(|tx| {
                launches::set_session_file(tx, id, &path.display().to_string(), &session_id)
            })?;
            path
        }
    };
    let marks = e.store.write(|tx| {
        workers::keep_outcome(tx, id)?;
        workers::run_marks(tx, id)
    })?;
    let first = if fresh {
        pending_messages(e, id)?.into_iter().next()
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
            env: worker_env(e, &row.facts.worker_id, &row.facts.coordinator_id),
            clear_env: false,
            start: match &first {
                Some(m) => StartKind::Prompt(m.body.clone()),
                None => StartKind::Resumed,
            },
        })
        .await;
    let outcome = launched?;
    if let Some(view) = e.rt.watch(id) {
        tokio::spawn(monitor(
            e.store.clone(),
            e.rt.clone(),
            id.clone(),
            view,
            marks.into(),
            e.interrupting.clone(),
        ));
    }
    let Some(first) = first else {
        return Ok(true);
    };
    // No answer: either the child is slow (the prompt sits in its input and counts as
    // delivered) or it closed before answering (the prompt stays pending).
    match outcome.prompt_accepted {
        Some(true) => mark_delivered(e, first.id)?,
        None if !closing(e, id).await => mark_delivered(e, first.id)?,
        None => return Ok(false),
        Some(false) => {
            rejected(e, id).await?;
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether the child is closing (or closed): a child whose pipes closed is recorded closed
/// within the pipe drain time, so this waits up to [`CLOSE_SETTLE`] for that.
async fn closing(e: &Engine, id: &ThreadId) -> bool {
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
async fn rejected(e: &Engine, id: &ThreadId) -> Result<()> {
    if !closing(e, id).await {
        set_outcome(&e.store, id, Outcome::Failed)?;
    }
    Ok(())
}

/// Sends every pending message of a live worker in order: `prompt` when it is idle, else
/// `follow_up`. Stops at the first rejection (the message stays pending).
async fn deliver_pending(e: &Engine, id: &ThreadId) -> Result<()> {
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
