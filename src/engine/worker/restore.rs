//! `threads.restore`: shows the hidden workers again; shared with `threadbase http`.

use super::facts_of;
use crate::contract::worker::WorkerFacts;
use crate::error::Result;
use crate::store::workers;
use crate::store::Store;

/// Gives every hidden worker of the given coordinators the hidden override `false` (even a PASS
/// worker shows again), then returns their facts, in one transaction.
pub fn restore_workers(
    store: &Store,
    coordinator_ids: &[crate::domain::SessionId],
) -> Result<Vec<WorkerFacts>> {
    let hosts = crate::store::facts::HostCheck::of(store.hosts_to_check());
    store.write(|tx| {
        workers::restore_hidden(tx, coordinator_ids)?;
        facts_of(
            tx,
            workers::workers_of_coordinators(tx, coordinator_ids)?,
            hosts,
        )
    })
}

/// `threads.restore`: the bare `{workers}` of the coordinators named, restored first.
pub(in crate::engine) fn restore(
    e: &super::Engine,
    req: crate::contract::worker::Coordinators,
) -> Result<crate::engine::Reply> {
    let facts = restore_workers(&e.store, &req.coordinator_ids)?;
    Ok(crate::engine::Reply::shaped(move |w| {
        crate::engine::reply::json(w, &crate::contract::worker::Workers::of(&facts))
    }))
}
