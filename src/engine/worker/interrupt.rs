//! `threads_interrupt`: aborts a worker's current run, here when this serve holds its process,
//! else through an `interrupt` command row for the serve that does.

use crate::domain::ThreadStatus;
use std::time::{Duration, Instant};

use super::{answer_worker, load, owned};
use crate::engine::Engine;
use crate::error::Result;
use crate::runtime::mapping::Phase;
use crate::store::commands::{self, CommandKind};

/// How long `threads_interrupt` waits for the aborted run to be recorded.
const INTERRUPT_SETTLE: Duration = Duration::from_millis(3_000);
/// RPC timeout of the abort a `threads_interrupt` sends.
const ABORT_TIMEOUT: Duration = Duration::from_millis(5_000);

pub(in crate::engine) async fn interrupt(
    e: &Engine,
    req: crate::contract::worker::WorkerRef,
) -> Result<crate::engine::Reply> {
    let row = owned(e, &req.worker_id)?;
    let id = row.id().clone();
    // A worker still waiting in the queue (THREADBASE_QUEUE=1) is taken out of it: closed,
    // interrupted, never launched.
    if crate::engine::thread::stop_queued(e, &id)? {
        e.store.write(|tx| {
            crate::store::workers::set_outcome(tx, &id, crate::domain::Outcome::Interrupted)
        })?;
        return answer_worker(load(e, &req.worker_id)?.facts);
    }
    e.rt.await_launch(&id, crate::runtime::LAUNCH_WAIT).await;
    if e.rt.is_live(&id) {
        let running =
            e.rt.watch(&id)
                .is_some_and(|v| v.borrow().phase != Phase::Idle);
        if running {
            e.interrupting.insert(&id);
        }
        let _ = e.rt.abort(&id, ABORT_TIMEOUT).await;
        if running {
            let deadline = Instant::now() + INTERRUPT_SETTLE;
            while e.interrupting.contains(&id) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            e.interrupting.remove(&id);
        }
    } else if row.facts.status == ThreadStatus::Live
        && crate::identity::holder(row.owner, e.rt.owner())
            .elsewhere()
            .is_some()
    {
        // Another serve holds the pipes: ask it through a command row (its watcher aborts).
        e.store
            .write(|tx| commands::request(tx, &id, CommandKind::Interrupt))?;
    }
    e.rt.flush().await;
    answer_worker(load(e, &req.worker_id)?.facts)
}
