//! The durable queue (`THREADBASE_QUEUE=1`, issues 30 and 45), one for the three contracts. A
//! start over its contract's limit reserves its row as usual (id, path and name at once,
//! `starting`) and marks it queued (`store::queue::mark`); it holds no slot. Each contract is a
//! lane of its own manager ([`Lane`]): its limit (A: `PI_THREADS_MAX_THREADS` live threads; B:
//! `PI_SUBAGENTS_MAX_CONCURRENT` working threads of the registry, whose waiting rows say
//! `Queued (position N)`; C: `THREADBASE_MAX_WORKERS` workers of the coordinator), its count of
//! the slots held (`store::queue::Slots`), and its launch (A: `thread/start.rs`
//! `launch_queued`; B: `agent/spawn.rs` `launch_queued`, as a detached spawn; C:
//! `worker/drive.rs` `drive`). Whenever the rows change (a thread closed, settled, was stopped
//! or restored, a serve started), [`changed`] runs one drain under one lock: for each lane it
//! claims the free slots for the oldest waiting rows in one transaction that counts them
//! (`sql/queue_claim.sql`), then launches every claimed row not launched yet, oldest first, so
//! a claimed row is launched once. A claimed row never launched (its serve died between the
//! two) is launched by the next serve of its manager: the restore pass leaves it alone
//! (`sql/restore_candidates.sql`) and it still holds its slot. Once serve shuts down
//! ([`Queue::close`]) the queue launches nothing: its rows wait for the session's next serve.
//!
//! While contract A's rows wait, an idle thread yields its slot ([`yield_slots`],
//! `THREADBASE_QUEUE_IDLE_MS`): `sql/queue_yield.sql` picks this serve's idle threads, longest
//! idle first, each with the waiting row its slot goes to; a due one is stopped as idle cleanup
//! stops it (`Runtime::yield_slot`: resumable, its parent's close notice saying `It yielded its
//! slot to /root/b (idle 0.0s).`), and its close is the commit after which the next drain
//! claims the slot. The queue's order is the order of the start requests as serve read them:
//! starts reserve their rows in that order (`thread/order.rs`), so rowid order, which every
//! queue query ranks by, is request order.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::agent::Agents;
use super::Engine;
use crate::domain::{ManagerId, ThreadId, WorkerId};
use crate::error::Result;
use crate::store::queue::{self, Slots};
use crate::store::threads::{manager_id, Contract};
use crate::time::{iso_from_ms, ms_from_iso, now_iso, now_ms};

/// The queue's state in a serve's [`Engine`].
#[derive(Default)]
pub(super) struct Queue {
    /// Serialises the drains, so a claimed row is launched once.
    lock: tokio::sync::Mutex<()>,
    /// The drain that runs when the longest idle thread may yield its slot to a waiting row,
    /// set by the last drain that found one not idle long enough.
    wake: Mutex<Option<tokio::task::AbortHandle>>,
    /// Serve is shutting down: the queue launches nothing more.
    closed: AtomicBool,
}

impl Queue {
    /// From here on the queue claims and launches nothing (its rows wait for the session's
    /// next serve, as after a crash); a drain under way finishes first, so no child is
    /// launched after the shutdown stopped the live ones.
    pub(super) async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _one = self.lock.lock().await;
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

/// A contract's lane of the queue.
#[derive(Debug, Clone, Copy)]
enum Lane {
    Thread,
    Agent,
    Worker,
}

impl Lane {
    const ALL: [Lane; 3] = [Lane::Thread, Lane::Agent, Lane::Worker];

    /// The manager whose rows wait in this lane, `None` before it exists.
    fn manager(self, e: &Engine) -> Result<Option<ManagerId>> {
        match self {
            Lane::Thread => Ok(Some(e.manager_id)),
            Lane::Agent => Ok(Some(e.agent.registry())),
            Lane::Worker => manager_id(&e.store.read()?, &e.cfg.session_id, Contract::Worker),
        }
    }

    /// What holds its slots, and how many there are.
    fn limit(self, e: &Engine) -> (Slots<'_>, i64) {
        let s = &e.cfg.settings;
        match self {
            Lane::Thread => (Slots::Live, s.limits.max_threads),
            Lane::Agent => (Slots::Working, s.agent_limits.max_concurrent),
            Lane::Worker => (Slots::Workers(&e.cfg.session_id), s.max_workers),
        }
    }

    /// Launches the claimed row `id` of `manager`.
    async fn launch(self, e: &Engine, manager: ManagerId, id: &ThreadId) -> Result<()> {
        match self {
            Lane::Thread => super::thread::launch_queued(e, id).await,
            Lane::Agent => Agents(e).launch_queued(manager, id).await,
            Lane::Worker => super::worker::drive::drive(e, &WorkerId::new(id.as_str())).await,
        }
    }

    /// Claims its free slots for its oldest waiting rows and launches every claimed row not
    /// launched yet, oldest first; contract A's idle threads then yield to rows still waiting.
    async fn drain(self, e: &Engine) -> Result<()> {
        let Some(manager) = self.manager(e)? else {
            return Ok(());
        };
        let waiting = !queue::waiting(&e.store.read()?, manager)?.is_empty();
        if waiting {
            let (slots, max) = self.limit(e);
            e.store
                .write(|tx| queue::claim(tx, manager, slots, max, &now_iso()))?;
        }
        for id in queue::to_launch(&e.store.read()?, manager)? {
            if e.rt.is_live(&id) {
                continue;
            }
            if let Err(err) = self.launch(e, manager, &id).await {
                tracing::warn!(thread = %id, lane = ?self, "a queued thread failed to launch: {err}");
            }
        }
        if waiting && matches!(self, Lane::Thread) {
            yield_slots(e).await?;
        }
        Ok(())
    }
}

/// See [`Engine::queue_changed`]: one drain of every lane, on a task of its own; nothing when
/// the queue is off or closed.
pub(super) fn changed(e: &Arc<Engine>) {
    if !e.cfg.settings.queue || e.queue.is_closed() {
        return;
    }
    let e = e.clone();
    tokio::spawn(tracing::Instrument::in_current_span(async move {
        let _one = e.queue.lock.lock().await;
        for lane in Lane::ALL {
            if e.queue.is_closed() {
                return;
            }
            if let Err(err) = lane.drain(&e).await {
                tracing::warn!(lane = ?lane, "launching queued threads failed: {err}");
            }
        }
    }));
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
                        changed(&e);
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
        &mut *e.queue.wake.lock().unwrap_or_else(|p| p.into_inner()),
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
