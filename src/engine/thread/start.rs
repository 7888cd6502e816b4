//! `start`: reserve the thread, write its session file, launch its child with the prompt.

use super::reserve::{
    check_new_child, child_argv, child_launch, claim_path, claim_path_or_queue, insert_child,
    launched, new_session_file, resolve_cwd, Child,
};
use super::{reply, Engine};
use crate::contract::projection::{Detail, Projection};
use crate::contract::thread::{Details, Single, SnapshotJson};
use crate::contract::{format, naming};
use crate::domain::ThreadId;
use crate::engine::isolation;
use crate::engine::Reply;
use crate::error::Result;
use crate::runtime::{LaunchOutcome, StartKind};
use crate::store::launches;
use crate::store::queue::{self, QueueState};
use crate::store::threads::thread_by_id_any;
use std::path::{Path, PathBuf};

pub(in crate::engine) async fn start(
    e: &Engine,
    req: crate::contract::thread::Start,
    turn: Option<super::order::StartTurn>,
) -> Result<Reply> {
    let crate::contract::thread::Start {
        prompt,
        name,
        task_name,
        args,
        cwd,
    } = req;
    check_new_child(e, &args)?;
    let asked_cwd = resolve_cwd(e, cwd.as_deref())?;
    // Issue 48: with isolation on, the child runs in a worktree of its own (named below).
    let isolation = isolation::prepare(e.cfg.settings.isolation, &asked_cwd)?;
    let id = crate::ids::new_thread_id();
    let short = &id.as_str()[7..13];
    let base = naming::base_task_name(name.as_deref(), Some(&prompt), short);
    let depth = e.cfg.depth + 1;
    // Starts read before this one reserve first (`order`): rowid order is request order.
    if let Some(turn) = &turn {
        turn.wait().await;
    }
    // From the insert on, the thread is starting: a send or wait meanwhile waits for its child.
    let _launching = e.rt.reserve_launch(&id);
    // Reserve the path: limits, uniqueness and the insert in one transaction.
    let (path, display, queued, plan) = e.store.write(|tx| {
        let (task, path, queued) = if e.cfg.settings.queue {
            claim_path_or_queue(e, tx, task_name.as_deref(), &base)?
        } else {
            let (task, path) = claim_path(e, tx, "start", task_name.as_deref(), &base)?;
            (task, path, false)
        };
        let plan = isolation.plan(&id, &task);
        let cwd = plan.as_ref().map_or(asked_cwd.clone(), |p| p.cwd.clone());
        let display = naming::display_name(name.as_deref(), Some(&prompt), Some(&task), short);
        insert_child(
            e,
            tx,
            &Child {
                id: &id,
                task: &task,
                path: &path,
                name: &display,
                cwd: &cwd,
                args: &args,
                prompt: Some(&prompt),
                session: None,
            },
        )?;
        if let Some(plan) = &plan {
            isolation::record(tx, &id, plan)?;
        }
        if queued {
            crate::store::queue::mark(tx, &id, &crate::time::now_iso())?;
        }
        Ok((path, display, queued, plan))
    })?;
    // Reserved: the next start may reserve.
    drop(turn);
    let cwd = plan.as_ref().map_or(asked_cwd.clone(), |p| p.cwd.clone());
    // The worktree is made now, queued or not: a queued row launches later in its cwd.
    if let Some(plan) = &plan {
        launched(e, &id, async { isolation::create(e, &id, plan) }).await?;
    }
    if queued {
        // No slot: the row waits in the queue; a freed slot launches it (`queue`).
        drop(_launching);
        return queued_reply(e, &id);
    }
    let child = Launch {
        id: &id,
        path: &path,
        depth,
        args: &args,
        name: &display,
        cwd: &cwd,
    };
    let outcome = launched(e, &id, child.with_prompt(e, prompt.clone())).await?;
    let facts = e.facts(&id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let note = match (outcome.note, isolation.note()) {
        (Some(a), Some(b)) => Some(format!("{a} {b}")),
        (a, b) => a.or(b),
    };
    let text = format::started(&snap, outcome.prompt_accepted, note.as_deref());
    reply(
        text,
        Details::Started {
            thread: Single::of(SnapshotJson::new(&snap)?),
            prompt_accepted: outcome.prompt_accepted,
            note,
        },
    )
}

/// `start`'s answer for a queued thread: `Started` with the snapshot (phase `queued`, its
/// position) and `promptAccepted: false`, and a note that says it is queued.
fn queued_reply(e: &Engine, id: &ThreadId) -> Result<Reply> {
    let facts = e.facts(id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let note = format!(
        "queued at position {}: the live thread limit PI_THREADS_MAX_THREADS={} is reached; it launches with its prompt when a slot frees.",
        snap.queue_position.unwrap_or(0),
        e.cfg.settings.limits.max_threads
    );
    // No process has the prompt yet: not accepted (`false`, as the text's `no`), not unknown.
    let text = format::started(&snap, Some(false), Some(&note));
    reply(
        text,
        Details::Started {
            thread: Single::of(SnapshotJson::new(&snap)?),
            prompt_accepted: Some(false),
            note: Some(note),
        },
    )
}

/// The queue's launch of contract A's claimed row `id` (`engine/queue.rs`), with the prompt,
/// args and cwd it was started with.
pub(in crate::engine) async fn launch_queued(e: &Engine, id: &ThreadId) -> Result<()> {
    let _launching = e.rt.reserve_launch(id);
    let (row, prompt) = {
        let conn = e.store.read()?;
        if queue::state(&conn, id)? != QueueState::Claimed {
            return Ok(());
        }
        let Some(row) = thread_by_id_any(&conn, id)? else {
            return Ok(());
        };
        (row, queue::prompt_of(&conn, id)?.unwrap_or_default())
    };
    let cwd = PathBuf::from(&row.cwd);
    let child = Launch {
        id,
        path: &row.path,
        depth: row.depth,
        args: &row.args,
        name: &row.name,
        cwd: &cwd,
    };
    launched(e, id, child.with_prompt(e, prompt)).await?;
    Ok(())
}

/// A reserved thread to launch with its first prompt, by a start or by the queue.
struct Launch<'a> {
    id: &'a ThreadId,
    path: &'a str,
    depth: i64,
    args: &'a [String],
    name: &'a str,
    cwd: &'a Path,
}

impl Launch<'_> {
    /// A new session file, recorded on the row, then the child in `cwd` with `prompt`.
    async fn with_prompt(&self, e: &Engine, prompt: String) -> Result<LaunchOutcome> {
        let (session, session_id) = new_session_file(e, self.cwd, e.cfg.session_file.as_deref())?;
        e.store.write(|tx| {
            launches::set_session_file(tx, self.id, &session.display().to_string(), &session_id)
        })?;
        let argv = child_argv(e, self.args, self.cwd, &session, self.name)?;
        let start = StartKind::Prompt(prompt);
        e.rt.launch(child_launch(
            e, self.id, self.path, self.depth, argv, self.cwd, start,
        ))
        .await
    }
}
