//! Contract A's durable queue (`THREADBASE_QUEUE=1`, issue 30). A start over
//! `PI_THREADS_MAX_THREADS` reserves its row as usual (id, path and name at once) and marks it
//! queued (`store::queue::mark`); it holds no slot. Whenever the rows change (a thread closed,
//! was stopped or restored, a serve started), [`queue_changed`] claims this manager's free
//! slots for its oldest queued rows in one transaction that counts them
//! (`sql/queue_claim.sql`), then launches the claimed rows in order. A claimed row never
//! launched (its serve died between the two) is launched by the next serve of the manager: the
//! restore pass leaves it alone (`sql/restore_candidates.sql`) and it still holds its slot.
//! Once serve shuts down (`Engine::close_queue`) contract A's and C's queues launch nothing:
//! their rows wait for the session's next serve.
//!
//! While rows wait, an idle thread yields its slot (issue 45, `THREADBASE_QUEUE_IDLE_MS`,
//! [`yield_slots`]): `sql/queue_yield.sql` picks this serve's idle threads, longest idle
//! first, each with the waiting row its slot goes to; a due one is stopped as idle cleanup
//! stops it (`Runtime::yield_slot`: resumable, its parent's close notice saying
//! `It yielded its slot to /root/b (idle 0.0s).`), and its close is the commit after which
//! the next drain claims the slot. The queue's order is the order of the start requests as
//! serve read them: starts reserve their rows in that order (`order.rs`), so rowid order,
//! which every queue query ranks by, is request order.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::reserve::{child_argv, child_launch, launched, new_session_file};
use super::{reply, Engine};
use crate::contract::format;
use crate::contract::projection::{Detail, Projection};
use crate::contract::thread::{Details, Single, SnapshotJson};
use crate::domain::{ExitKind, ThreadId};
use crate::engine::Reply;
use crate::error::{Error, Result};
use crate::runtime::StartKind;
use crate::store::events::{self, NewEvent};
use crate::store::launches;
use crate::store::queue::{self, QueueState};
use crate::store::threads::{thread_by_id_any, ThreadRow};
use crate::time::{iso_from_ms, ms_from_iso, now_iso, now_ms};

/// See [`Engine::queue_changed`].
pub(crate) fn queue_changed(e: &Arc<Engine>) {
    if !e.cfg.settings.queue {
        return;
    }
    // Contract B's side of this serve has a queue of its own (its concurrency limit).
    e.agent_queue_changed();
    if e.queue_closed.load(Ordering::SeqCst) {
        return;
    }
    let e = e.clone();
    tokio::spawn(tracing::Instrument::in_current_span(async move {
        if let Err(err) = drain(&e).await {
            tracing::warn!("launching queued threads failed: {err}");
        }
        // Contract C's workers of this session, under the same lock.
        let _one = e.queue.clone().lock_owned().await;
        if e.queue_closed.load(Ordering::SeqCst) {
            return;
        }
        if let Err(err) = crate::engine::worker::drain_queue(&e).await {
            tracing::warn!("starting queued workers failed: {err}");
        }
    }));
}

/// Claims free slots for the oldest queued rows and launches every claimed row not launched
/// yet, oldest first. One drain at a time per serve, so a claimed row is launched once.
async fn drain(e: &Engine) -> Result<()> {
    let _one = e.queue.clone().lock_owned().await;
    if e.queue_closed.load(Ordering::SeqCst) {
        return Ok(());
    }
    let manager = e.manager_id;
    let waiting = {
        let conn = e.store.read()?;
        !queue::waiting(&conn, manager)?.is_empty()
    };
    if waiting {
        let max = e.cfg.settings.limits.max_threads;
        e.store
            .write(|tx| queue::claim(tx, manager, max, &now_iso()))?;
    }
    let claimed = queue::to_launch(&e.store.read()?, manager)?;
    for id in claimed {
        if e.rt.is_live(&id) {
            continue;
        }
        if let Err(err) = launch(e, &id).await {
            tracing::warn!(thread = %id, "a queued thread failed to launch: {err}");
        }
    }
    if waiting {
        yield_slots(e).await?;
    }
    Ok(())
}

/// While rows wait, this serve's idle threads yield their slots to them, longest idle first,
/// once idle `THREADBASE_QUEUE_IDLE_MS` (`sql/queue_yield.sql` picks them, and the row each
/// frees a slot for). Each is stopped as idle cleanup stops it, so it stays resumable, and its
/// parent's notice says which row took its slot; its close is a commit, and the drain that
/// follows claims the slot and launches that row. A thread not idle long enough yet sets one
/// wake-up for when it will be (a drain then runs again).
async fn yield_slots(e: &Engine) -> Result<()> {
    let idle_ms = i64::try_from(e.cfg.settings.queue_idle.as_millis()).unwrap_or(i64::MAX);
    let now = now_ms();
    let cutoff = iso_from_ms(now.saturating_sub(idle_ms));
    let owner = e.rt.owner();
    let yields = queue::yields(
        &e.store.read()?,
        e.manager_id,
        (owner.pid, owner.started_at),
        e.cfg.settings.limits.max_threads,
        &cutoff,
    )?;
    let mut stops = tokio::task::JoinSet::new();
    let mut wake = None;
    for y in yields {
        let since = ms_from_iso(&y.idle_since).unwrap_or(now);
        if !y.due {
            // Longest idle first: the rest are not due either.
            let after = Duration::from_millis(
                since.saturating_add(idle_ms).saturating_sub(now).max(1) as u64,
            );
            let me = e.me.clone();
            wake = Some(
                tokio::spawn(async move {
                    tokio::time::sleep(after).await;
                    if let Some(e) = me.upgrade() {
                        e.queue_changed();
                    }
                })
                .abort_handle(),
            );
            break;
        }
        let idle = now.saturating_sub(since).max(0) as f64 / 1000.0;
        let note = format!("It yielded its slot to {} (idle {idle:.1}s).", y.to);
        tracing::info!(thread = %y.id, to = %y.to, "an idle thread yields its slot to a queued one");
        let rt = e.rt.clone();
        stops.spawn(async move { rt.yield_slot(&y.id, note).await });
    }
    let old = std::mem::replace(
        &mut *e.queue_wake.lock().unwrap_or_else(|p| p.into_inner()),
        wake,
    );
    if let Some(old) = old {
        old.abort();
    }
    while let Some(done) = stops.join_next().await {
        if let Ok(Err(err)) = done {
            tracing::warn!("an idle thread failed to yield its slot: {err}");
        }
    }
    Ok(())
}

/// Launches the claimed row `id` with the prompt, args and cwd it was started with.
async fn launch(e: &Engine, id: &ThreadId) -> Result<()> {
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
    launched(e, id, async {
        let (session, session_id) = new_session_file(e, &cwd, e.cfg.session_file.as_deref())?;
        e.store.write(|tx| {
            launches::set_session_file(tx, id, &session.display().to_string(), &session_id)
        })?;
        let argv = child_argv(e, &row.args, &cwd, &session, &row.name)?;
        let start = StartKind::Prompt(prompt);
        e.rt.launch(child_launch(e, id, &row.path, row.depth, argv, &cwd, start))
            .await
    })
    .await?;
    Ok(())
}

/// See [`Engine::stop_queued`]: the row is closed as stopped with its `thread_closed` event, in
/// one transaction, only while it still waits for a slot.
pub(crate) fn stop_queued(e: &Engine, id: &ThreadId) -> Result<bool> {
    e.store.write(|tx| {
        let at = now_iso();
        if !queue::dequeue(tx, id, &at)? {
            return Ok(false);
        }
        let data = json!({"exit": {"kind": ExitKind::Stopped, "message": DEQUEUED}}).to_string();
        events::append(
            tx,
            id,
            &[NewEvent {
                at: &at,
                kind: "thread_closed",
                data: &data,
            }],
        )?;
        Ok(true)
    })
}

/// The exit message of a thread stopped while queued (as `sql/queue_dequeue.sql` writes it).
pub const DEQUEUED: &str = "Stopped while queued; never launched.";

/// `start`'s answer for a queued thread: `Started` with the snapshot (phase `queued`, its
/// position) and `promptAccepted: false`, and a note that says it is queued.
pub(super) fn queued_reply(e: &Engine, id: &ThreadId) -> Result<Reply> {
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

/// A `send` to a thread still waiting in the queue has no process to reach: refused with its
/// position and what to do (its prompt goes out when it is launched).
pub(super) fn refuse_while_queued(e: &Engine, row: &ThreadRow, verb: &str) -> Result<()> {
    match queue::position(&e.store.read()?, &row.id)? {
        None => Ok(()),
        Some(n) => Err(Error::conflict(format!(
            "{} is queued (position {n}) and has no Pi process yet to {verb} to. Repair: wait on it (its prompt goes out when a slot frees and it launches), then {verb}; or stop it to take it out of the queue.",
            row.path
        ))),
    }
}
