//! A batch of threads' facts for their projections, read in a fixed number of queries: what
//! `list` and the snapshot cache's filler render from. A leaf of the engine: it calls only the
//! store.

use crate::contract::projection::{recent_event_count, Detail, ThreadFacts};
use crate::error::Result;
use crate::store::events;
use crate::store::threads::ThreadRow;
use crate::store::ThreadIds;

/// The facts of `rows` (in their order) for a projection at `detail`, in three more queries
/// whatever their number: the retained output of all of them, the retained events each
/// shows at that detail (only its last few: they are what the snapshot shows), and what each
/// spent.
pub(super) fn thread_facts(
    conn: &crate::store::Conn,
    rows: Vec<ThreadRow>,
    detail: Detail,
) -> Result<Vec<ThreadFacts>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids = ThreadIds::new(rows.iter().map(|r| &r.id))?;
    let outs = crate::store::output::of_threads(conn, &ids)?;
    let events = events::rows_of_threads(conn, &ids, recent_event_count(detail))?;
    let usage = crate::store::usage::of_threads(conn, &ids)?;
    let pending = rows
        .iter()
        .map(|r| super::pending_of(conn, r))
        .collect::<Result<Vec<_>>>()?;
    Ok(rows
        .into_iter()
        .zip(outs)
        .zip(events)
        .zip(usage)
        .zip(pending)
        .map(|((((row, out), events), usage), pending)| ThreadFacts {
            row,
            out,
            events,
            usage,
            pending,
        })
        .collect())
}
