//! The durable queue (`THREADBASE_QUEUE=1`, issue 30): a start over the live limit is a row
//! like any other (live, `starting`, its id, path and name taken at once) marked `queued_at`.
//! It holds no slot until a transaction that counts the free slots claims one for it
//! (`dequeued_at`); its launch follows. The order is the rank of the waiting rows by rowid (the
//! reservation order) and the slot count is `sql/count_live.sql`: both are SQL, nothing is kept
//! in memory, so the queue survives a crash of its serve.

use crate::store::{Conn, ThreadIds};
use rusqlite::{named_params, OptionalExtension};

use crate::domain::{ManagerId, SessionId, ThreadId};
use crate::error::Result;

/// Marks the just-reserved row `id` as queued (in the reserving transaction).
pub fn mark(conn: &Conn, id: &ThreadId, at: &str) -> Result<()> {
    conn.db()
        .prepare_cached(include_str!("../../sql/queue_mark.sql"))?
        .execute((id, at))?;
    Ok(())
}

/// `id`'s position in its manager's queue (1 = launched next), `None` when it is not waiting
/// for a slot.
pub fn position(conn: &Conn, id: &ThreadId) -> Result<Option<i64>> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/queue_position.sql"))?
        .query_row([id], |r| r.get(0))
        .optional()?)
}

/// The queue positions of the threads `ids`, by position in it (a
/// list's batch, one query): each as [`position`] gives it, `None` when not waiting for a slot.
pub fn positions_of_threads(conn: &Conn, ids: &ThreadIds) -> Result<Vec<Option<i64>>> {
    let mut out = vec![None; ids.len()];
    conn.by_position(
        include_str!("../../sql/queue_positions_of_threads.sql"),
        ids,
        &mut out,
        |r| r.get(1).map(Some),
    )?;
    Ok(out)
}

/// One waiting row of a manager's queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub id: String,
    pub path: String,
    pub position: i64,
}

/// The rows of `manager` waiting for a slot, in queue order.
pub fn waiting(conn: &Conn, manager: ManagerId) -> Result<Vec<Waiting>> {
    let mut stmt = conn
        .db()
        .prepare_cached(include_str!("../../sql/queue_rank.sql"))?;
    let rows = stmt.query_map([manager], |r| {
        Ok(Waiting {
            id: r.get(0)?,
            path: r.get(1)?,
            position: r.get(2)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Claims `manager`'s free slots (of `max`) for its oldest waiting rows; returns how many.
pub fn claim(conn: &Conn, manager: ManagerId, max: i64, at: &str) -> Result<usize> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/queue_claim.sql"))?
        .execute(named_params! {":manager": manager, ":max": max, ":at": at})?)
}

/// The rows of `manager` with a claimed slot that were never launched, oldest first.
pub fn to_launch(conn: &Conn, manager: ManagerId) -> Result<Vec<ThreadId>> {
    let mut stmt = conn
        .db()
        .prepare_cached(include_str!("../../sql/queue_to_launch.sql"))?;
    let rows = stmt.query_map([manager], |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Closes `id` as stopped if it is still waiting for a slot (never launched); false otherwise.
pub fn dequeue(conn: &Conn, id: &ThreadId, at: &str) -> Result<bool> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/queue_dequeue.sql"))?
        .execute((id, at))?
        > 0)
}

/// Where a queued row stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueState {
    /// Not queued, or launched already.
    NotQueued,
    /// Waiting for a slot.
    Waiting,
    /// A slot is claimed; the launch is under way (or follows at the next serve).
    Claimed,
}

/// `id`'s queue state.
pub fn state(conn: &Conn, id: &ThreadId) -> Result<QueueState> {
    let row: Option<(bool, bool)> = conn
        .db()
        .prepare_cached(include_str!("../../sql/queue_is_waiting.sql"))?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(match row {
        Some((true, false)) => QueueState::Waiting,
        Some((true, true)) => QueueState::Claimed,
        _ => QueueState::NotQueued,
    })
}

/// The prompt `id` was started with (`None` when the row is gone or has none).
pub fn prompt_of(conn: &Conn, id: &ThreadId) -> Result<Option<String>> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/queue_prompt.sql"))?
        .query_row([id], |r| r.get(0))
        .optional()?
        .flatten())
}

/// Contract B: claims `registry`'s free concurrency slots (of `max`) for its oldest waiting
/// rows, and renumbers the rest; returns how many were claimed.
pub fn claim_agents(conn: &Conn, registry: ManagerId, max: i64, at: &str) -> Result<usize> {
    let n = conn
        .db()
        .prepare_cached(include_str!("../../sql/agent_queue_claim.sql"))?
        .execute(named_params! {":manager": registry, ":max": max, ":at": at})?;
    renumber_agents(conn, registry)?;
    Ok(n)
}

/// Contract B: every waiting row's status says its position (`Queued (position N)`).
pub fn renumber_agents(conn: &Conn, registry: ManagerId) -> Result<()> {
    conn.db()
        .prepare_cached(include_str!("../../sql/agent_queue_renumber.sql"))?
        .execute([registry])?;
    Ok(())
}

/// Contract B: stops `id` if it still waits for a slot (closed, stopped, never launched) and
/// renumbers the rest; false when it was not waiting.
pub fn dequeue_agent(
    conn: &Conn,
    registry: ManagerId,
    id: &ThreadId,
    status: &str,
    at: &str,
) -> Result<bool> {
    let done = conn
        .db()
        .prepare_cached(include_str!("../../sql/agent_queue_dequeue.sql"))?
        .execute(named_params! {":id": id, ":status": status, ":at": at})?
        > 0;
    if done {
        renumber_agents(conn, registry)?;
    }
    Ok(done)
}

/// Contract C: claims `manager`'s free worker slots (of `max`, counted for `coordinator` as
/// the slot limit counts them) for its oldest waiting workers; returns how many.
pub fn claim_workers(
    conn: &Conn,
    manager: ManagerId,
    coordinator: &SessionId,
    max: i64,
    at: &str,
) -> Result<usize> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/worker_queue_claim.sql"))?
        .execute(named_params! {
            ":manager": manager, ":coordinator": coordinator, ":max": max, ":at": at,
        })?)
}
