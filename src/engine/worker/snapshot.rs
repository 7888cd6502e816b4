//! `threads.snapshot`: read-only, so it takes any connection (serve's reader, `threadbase
//! http`'s).

use super::facts_of;
use crate::contract::worker::WorkerFacts;
use crate::error::Result;
use crate::store::workers;
use crate::store::Conn;

/// The facts of the given coordinators' workers (hidden ones included), oldest first, in one
/// query. Usable from any process holding the database.
pub fn snapshot_workers(
    conn: &Conn,
    coordinator_ids: &[crate::domain::SessionId],
) -> Result<Vec<WorkerFacts>> {
    // Usable from any process: one that does not heartbeat looks for unreachable hosts.
    facts_of(
        conn,
        workers::workers_of_coordinators(conn, coordinator_ids)?,
        crate::store::facts::HostCheck::Look,
    )
}

/// `threads.snapshot`: the bare `{workers}` of the coordinators named.
pub(in crate::engine) fn snapshot(
    e: &super::Engine,
    req: crate::contract::worker::Coordinators,
) -> Result<crate::engine::Reply> {
    let facts = snapshot_workers(&e.store.read()?, &req.coordinator_ids)?;
    Ok(crate::engine::Reply::shaped(move |w| {
        crate::engine::reply::json(w, &crate::contract::worker::Workers::of(&facts))
    }))
}
