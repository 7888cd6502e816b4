//! A batch of threads' facts for their projections, read in a fixed number of queries: what
//! `list` and the snapshot cache's filler render from. A leaf of the engine: it calls only the
//! store.

use crate::contract::projection::{recent_event_count, Detail, Pending, ThreadFacts};
use crate::error::Result;
use crate::store::threads::ThreadRow;
use crate::store::{events, questions, queue};

/// The facts of `rows` (in their order) for a projection at `detail`, in five more queries
/// whatever their number: the retained output of all of them, the retained events each
/// shows at that detail (only its last few: they are what the snapshot shows), what each
/// spent, and what the live ones wait for (their queue positions and pending questions).
pub(super) fn thread_facts(
    conn: &crate::store::Conn,
    rows: Vec<ThreadRow>,
    detail: Detail,
) -> Result<Vec<ThreadFacts>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids = serde_json::to_string(&rows.iter().map(|r| r.id.as_str()).collect::<Vec<_>>())?;
    let outs = crate::store::output::of_threads(conn, &ids, rows.len())?;
    let events = events::rows_of_threads(conn, &ids, rows.len(), recent_event_count(detail))?;
    let usage = crate::store::usage::of_threads(conn, &ids, rows.len())?;
    let pending = pending_of_rows(conn, &rows)?;
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

/// What each of `rows` waits for, in their order, as `super::pending_of` gives it for one:
/// nothing for a closed thread, and for the live ones their queue positions and their oldest
/// pending questions in two queries over their ids (none when no row is live).
fn pending_of_rows(conn: &crate::store::Conn, rows: &[ThreadRow]) -> Result<Vec<Pending>> {
    let mut pending = vec![Pending::default(); rows.len()];
    let (live, ids) = live_ids(rows.iter().map(|r| (r.id.as_str(), r.is_live())))?;
    if live.is_empty() {
        return Ok(pending);
    }
    let positions = queue::positions_of_threads(conn, &ids, live.len())?;
    let asked = questions::pending_of_threads(conn, &ids, live.len())?;
    for ((at, queue_position), question) in live.into_iter().zip(positions).zip(asked) {
        pending[at] = Pending {
            queue_position,
            question,
        };
    }
    Ok(pending)
}

/// Of `threads` (each id and whether it is live), the places of the live ones and their ids as
/// the JSON array a batch query takes.
pub(super) fn live_ids<'a>(
    threads: impl Iterator<Item = (&'a str, bool)>,
) -> Result<(Vec<usize>, String)> {
    let (live, ids): (Vec<usize>, Vec<&str>) = threads
        .enumerate()
        .filter(|(_, (_, live))| *live)
        .map(|(at, (id, _))| (at, id))
        .unzip();
    Ok((live, serde_json::to_string(&ids)?))
}
