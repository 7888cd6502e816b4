//! The durable queue (`THREADBASE_QUEUE=1`, issue 30), one for the three contracts: a start
//! over its contract's limit is a row like any other (live, `starting`, its id, path and name
//! taken at once) marked `queued_at`. It holds no slot until a transaction that counts the free
//! slots claims one for it (`dequeued_at`, [`claim`]); its launch follows. The order is the
//! rank of the waiting rows by rowid (the reservation order, which is the order serve read the
//! start requests: `engine/thread/order.rs`) and the slots held are each contract's count
//! ([`Slots`]): both are SQL, nothing is kept in memory, so the queue survives a crash of its
//! serve. Which idle threads yield their slots to
//! waiting rows (`THREADBASE_QUEUE_IDLE_MS`) is SQL too ([`yields`]).

use crate::store::db::{named, params, q};
use crate::store::{Conn, ThreadIds};

use crate::domain::{ManagerId, SessionId, ThreadId};
use crate::error::Result;
use crate::store::batch_col;
use crate::store::rows::columns;

/// Marks the just-reserved row `id` as queued (in the reserving transaction).
pub fn mark(conn: &Conn, id: &ThreadId, at: &str) -> Result<()> {
    conn.execute(q!("queue_mark"), params![id, at])?;
    Ok(())
}

/// `id`'s position in its manager's queue (1 = launched next), `None` when it is not waiting
/// for a slot.
pub fn position(conn: &Conn, id: &ThreadId) -> Result<Option<i64>> {
    conn.opt(q!("queue_position"), params![id], |r| r.get(0))
}

columns! {
    /// A waiting thread's position in its manager's queue (`{queue_position_row}`, after the
    /// batch's `{batch_row}` in `sql/queue_positions_of_threads.sql`, which reads `threads t`),
    /// read by [`positions_of_threads`].
    pub mod position_col as "{queue_position_row}" {
        POSITION = "(SELECT count(*) FROM threads q WHERE q.manager_id = t.manager_id AND q.queued_at IS NOT NULL AND q.dequeued_at IS NULL AND q.status = 'live' AND q.rowid <= t.rowid)",
    }
}

/// The queue positions of the threads `ids`, by position in it (a
/// list's batch, one query): each as [`position`] gives it, `None` when not waiting for a slot.
pub fn positions_of_threads(conn: &Conn, ids: &ThreadIds) -> Result<Vec<Option<i64>>> {
    let mut out = vec![None; ids.len()];
    conn.by_position(
        q!("queue_positions_of_threads", batch_col, position_col),
        ids,
        &mut out,
        |r| r.get(batch_col::COUNT + position_col::POSITION).map(Some),
    )?;
    Ok(out)
}

columns! {
    /// A waiting row of a manager's queue (`{queue_waiting_row}` in `sql/queue_rank.sql`, which
    /// reads `threads`): what [`Waiting`] holds.
    pub mod waiting_col as "{queue_waiting_row}" {
        ID = "id",
        PATH = "path",
        POSITION = "row_number() OVER (ORDER BY rowid) AS position",
    }
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
    let rows = conn
        .all(q!("queue_rank", waiting_col), params![manager], |r| {
            Ok(Waiting {
                id: r.get(waiting_col::ID)?,
                path: r.get(waiting_col::PATH)?,
                position: r.get(waiting_col::POSITION)?,
            })
        })?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

/// What holds a slot of a manager's queue, as each contract's limit counts it.
#[derive(Debug, Clone, Copy)]
pub enum Slots<'a> {
    /// Contract A (`PI_THREADS_MAX_THREADS`): the manager's live threads that hold one
    /// (`sql/count_live.sql`).
    Live,
    /// Contract B (`PI_SUBAGENTS_MAX_CONCURRENT`): the registry's working threads
    /// (`sql/agent_count_active.sql`); its waiting rows say their position.
    Working,
    /// Contract C (`THREADBASE_MAX_WORKERS`): the coordinator's workers that hold one
    /// (`sql/worker_slots_used.sql`).
    Workers(&'a SessionId),
}

impl Slots<'_> {
    /// How many slots are held now.
    pub fn held(self, conn: &Conn, manager: ManagerId) -> Result<i64> {
        match self {
            Slots::Live => crate::store::threads::count_live(conn, manager),
            Slots::Working => crate::store::agents::count_active(conn, manager),
            Slots::Workers(coordinator) => crate::store::workers::slots_used(conn, coordinator),
        }
    }

    /// Whether a new row of `manager` waits in the queue: every one of `max` slots is held, or
    /// rows wait already (none jumps the queue).
    pub fn must_wait(self, conn: &Conn, manager: ManagerId, max: i64) -> Result<bool> {
        Ok(self.held(conn, manager)? >= max || !waiting(conn, manager)?.is_empty())
    }
}

/// Claims `manager`'s free slots (of `max`, held as `slots` counts them) for its oldest
/// waiting rows, in the transaction that counts them (`sql/queue_claim.sql`); contract B's
/// rows still waiting are renumbered. Returns how many were claimed.
pub fn claim(conn: &Conn, manager: ManagerId, slots: Slots, max: i64, at: &str) -> Result<usize> {
    let free = (max - slots.held(conn, manager)?).max(0);
    let n = conn.execute(
        q!("queue_claim"),
        named! {":manager": manager, ":free": free, ":at": at},
    )?;
    if let Slots::Working = slots {
        renumber_agents(conn, manager)?;
    }
    Ok(n)
}

columns! {
    /// An idle thread that yields its slot and the waiting row that gets it
    /// (`{queue_yield_row}` in `sql/queue_yield.sql`, which reads `idle i`, `waiting w`):
    /// what [`Yield`] holds.
    pub mod yield_col as "{queue_yield_row}" {
        ID = "i.id",
        PATH = "i.path",
        IDLE_SINCE = "i.idle_started_at",
        TO = "w.path",
        DUE = "i.idle_started_at <= :cutoff",
    }
}

/// An idle thread of a manager paired with the waiting row its slot goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Yield {
    pub id: ThreadId,
    pub path: String,
    /// When its idle stretch began (ISO, this serve's clock).
    pub idle_since: String,
    /// The path of the waiting row that gets the slot.
    pub to: String,
    /// Idle since the cutoff at least: it yields now; the others later, in this order.
    pub due: bool,
}

/// Which of `manager`'s idle threads held by `owner` yield their slot to its waiting rows (of
/// `max` slots), longest idle first, each with the row it frees a slot for; `due` for those
/// idle since `cutoff` (now minus `THREADBASE_QUEUE_IDLE_MS`). Empty while nothing waits.
pub fn yields(
    conn: &Conn,
    manager: ManagerId,
    owner: (i64, i64),
    max: i64,
    cutoff: &str,
) -> Result<Vec<Yield>> {
    conn.all(
        q!("queue_yield", yield_col),
        named! {
            ":manager": manager, ":owner_pid": owner.0, ":owner_started": owner.1,
            ":max": max, ":cutoff": cutoff,
        },
        |r| {
            Ok(Yield {
                id: r.get(yield_col::ID)?,
                path: r.get(yield_col::PATH)?,
                idle_since: r.get(yield_col::IDLE_SINCE)?,
                to: r.get(yield_col::TO)?,
                due: r.get(yield_col::DUE)?,
            })
        },
    )
}

/// The rows of `manager` with a claimed slot that were never launched, oldest first.
pub fn to_launch(conn: &Conn, manager: ManagerId) -> Result<Vec<ThreadId>> {
    let rows = conn
        .all(q!("queue_to_launch"), params![manager], |r| r.get(0))?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

/// Closes `id` as stopped if it is still waiting for a slot (never launched); false otherwise.
pub fn dequeue(conn: &Conn, id: &ThreadId, at: &str) -> Result<bool> {
    Ok(conn.execute(q!("queue_dequeue"), params![id, at])? > 0)
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

columns! {
    /// Whether a row waits for a slot and whether one is claimed (`{queue_state_row}` in
    /// `sql/queue_is_waiting.sql`, which reads `threads`), read by [`state`].
    pub mod state_col as "{queue_state_row}" {
        QUEUED = "queued_at IS NOT NULL AND launch_seq = 0 AND status = 'live'",
        CLAIMED = "dequeued_at IS NOT NULL",
    }
}

/// `id`'s queue state.
pub fn state(conn: &Conn, id: &ThreadId) -> Result<QueueState> {
    let row: Option<(bool, bool)> =
        conn.opt(q!("queue_is_waiting", state_col), params![id], |r| {
            Ok((r.get(state_col::QUEUED)?, r.get(state_col::CLAIMED)?))
        })?;
    Ok(match row {
        Some((true, false)) => QueueState::Waiting,
        Some((true, true)) => QueueState::Claimed,
        _ => QueueState::NotQueued,
    })
}

/// The prompt `id` was started with (`None` when the row is gone or has none).
pub fn prompt_of(conn: &Conn, id: &ThreadId) -> Result<Option<String>> {
    Ok(conn
        .opt(q!("queue_prompt"), params![id], |r| r.get(0))?
        .flatten())
}

/// Contract B: every waiting row's status says its position (`Queued (position N)`).
pub fn renumber_agents(conn: &Conn, registry: ManagerId) -> Result<()> {
    conn.execute(q!("agent_queue_renumber"), params![registry])?;
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
    let done = conn.execute(
        q!("agent_queue_dequeue"),
        named! {":id": id, ":status": status, ":at": at},
    )? > 0;
    if done {
        renumber_agents(conn, registry)?;
    }
    Ok(done)
}
