//! Contract C's durable queue (`THREADBASE_QUEUE=1`, issue 30). A `threads_spawn` over
//! `THREADBASE_MAX_WORKERS` slots (or behind workers already waiting) records the worker as
//! usual (its identity, its prompt in its mailbox) and marks it queued; its `WorkerView` carries
//! `status: "queued (position N)"`. When the rows change (a worker reported, failed or was
//! interrupted), [`queue_changed`] claims the free slots for the oldest queued workers in one
//! transaction that counts them (`sql/worker_queue_claim.sql`) and brings them up in order
//! (`drive`). `threads_interrupt` of a queued worker takes it out of the queue.

use std::sync::Arc;

use super::drive::drive;
use crate::engine::Engine;
use crate::error::Result;
use crate::store::queue;
use crate::store::threads::{manager_id, Contract};
use crate::time::now_iso;

/// See the module docs; runs under the engine's queue lock (`engine/thread/queue.rs`).
pub(crate) async fn drain(e: &Arc<Engine>) -> Result<()> {
    let coordinator = &e.cfg.session_id;
    let Some(manager) = manager_id(&e.store.read()?, coordinator, Contract::Worker)? else {
        return Ok(());
    };
    if !queue::waiting(&e.store.read()?, manager)?.is_empty() {
        let max = e.cfg.settings.max_workers;
        e.store
            .write(|tx| queue::claim_workers(tx, manager, coordinator, max, &now_iso()))?;
    }
    for id in queue::to_launch(&e.store.read()?, manager)? {
        if e.rt.is_live(&id) {
            continue;
        }
        if let Err(err) = drive(e, &crate::domain::WorkerId::new(id.as_str())).await {
            tracing::warn!(worker = %id, "a queued worker failed to start: {err}");
        }
    }
    Ok(())
}
