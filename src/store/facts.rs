//! A thread's facts: everything its snapshot and its texts are made of (the row, its retained
//! output, its recent events, what it spent, what it waits for), read in one statement for one
//! thread (`sql/thread_facts.sql`) and in a fixed number of queries for a batch: what `poll`
//! and `list` render from (`contract/projection.rs`).

use crate::domain::ThreadId;
use crate::error::{Error, ErrorCode, Result};
use crate::store::attention::{self, Need};
use crate::store::db::{params, q, Cell, Row};
use crate::store::events::{self, EventRow};
use crate::store::hosts::{self, Unreachable};
use crate::store::output::{self, OutputFacts};
use crate::store::questions::{self, Question};
use crate::store::rows::columns;
use crate::store::threads::{self, ThreadRow};
use crate::store::usage::{self, Usage};
use crate::store::worktrees::{self, WorktreeRow};
use crate::store::{queue, Conn, ThreadIds};

/// Everything a snapshot is made of: the row, its retained output and its retained events
/// (oldest first).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadFacts {
    pub row: ThreadRow,
    pub out: OutputFacts,
    pub events: Vec<EventRow>,
    /// What the thread itself spent (`thread_usage`): the poll, wait and list texts show it.
    pub usage: Usage,
    /// What a live thread waits for: a slot in the queue, or its parent's answer (issue 30).
    pub pending: Pending,
    /// What needs the user about it (issue 45: the view `thread_attention`, [`attention`]).
    pub attention: Option<Need>,
    /// Its git worktree, when it is isolated (issue 48, `thread_worktrees`).
    pub worktree: Option<WorktreeFacts>,
}

/// An isolated thread's worktree: its row, and what it changed since its base when the
/// engine asked git (`poll`, `wait`, `start`: the text's `Worktree:` line). The store reads
/// the row only; `stat` is no row, so a poll of an isolated thread is never kept
/// (`engine/cache.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct WorktreeFacts {
    pub row: WorktreeRow,
    pub stat: Option<crate::worktree::Stat>,
}

/// What a live thread waits for (issue 30): its place in the queue (`THREADBASE_QUEUE=1`) or
/// its parent's answer to a question (`THREADBASE_UI=parent`). Both are absent by default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pending {
    /// Waiting for a slot, at this position (1 = launched next).
    pub queue_position: Option<i64>,
    /// The child's oldest question waiting for an answer.
    pub question: Option<Question>,
    /// The host that holds it, when that host's lease ran out (issue 33): nothing reaches the
    /// thread until the host is back or forgotten. Absent on one host.
    pub unreachable: Option<Unreachable>,
}

/// Whether a batch's facts look for unreachable hosts ([`hosts::unreachable_of`], one query):
/// not where the serve knows no other host ([`crate::Store::hosts_to_check`]). One thread's
/// ([`of_thread`]) always do, in the same statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostCheck {
    Look,
    OneHost,
}

impl HostCheck {
    pub fn of(look: bool) -> HostCheck {
        if look {
            HostCheck::Look
        } else {
            HostCheck::OneHost
        }
    }
}

columns! {
    /// What `sql/thread_facts.sql` selects after its parts (`{thread_facts_row}`): the
    /// thread's retained events as one JSON array (`[[seq, at, type, data], …]`, oldest
    /// first; the derived table `ev`).
    pub mod col as "{thread_facts_row}" {
        EVENTS = "ev.events",
    }
}

/// Where each part of `sql/thread_facts.sql`'s row starts: the thread row, then each part's
/// declared row in the order the query selects them (`o.*`, `u.*`, …), then [`col`].
mod at {
    use crate::store::{attention, hosts, output, questions, queue, threads, usage, worktrees};
    pub const OUTPUT: usize = threads::col::COUNT;
    pub const USAGE: usize = OUTPUT + output::col::COUNT;
    pub const QUEUE: usize = USAGE + usage::col::COUNT;
    pub const QUESTION: usize = QUEUE + queue::position_col::COUNT;
    pub const ATTENTION: usize = QUESTION + questions::col::COUNT;
    pub const WORKTREE: usize = ATTENTION + attention::col::COUNT;
    pub const UNREACHABLE: usize = WORKTREE + worktrees::col::COUNT;
    pub const FACTS: usize = UNREACHABLE + hosts::unreachable_col::COUNT;
}

/// A thread's facts by id, in one statement (`sql/thread_facts.sql`: its row, and every part
/// LEFT JOINed to it, its retained events as one JSON array): what `poll`, `wait` and every
/// single-thread answer render from. A part with no row reads as NULLs there: each is told
/// apart by a column its table never holds NULL in. What a live thread waits for (its queue
/// position, its pending question, its host whose lease ran out) is none for a closed one.
pub fn of_thread(conn: &Conn, id: &ThreadId) -> Result<ThreadFacts> {
    let found = conn.opt(
        q!(
            "thread_facts",
            threads::col,
            output::col,
            usage::col,
            queue::position_col,
            questions::col,
            attention::col,
            worktrees::col,
            hosts::unreachable_col,
            col
        ),
        params![id],
        read_facts,
    )?;
    found.ok_or_else(|| {
        Error::new(
            ErrorCode::UnknownReference,
            format!("Unknown thread: {id} (it was removed meanwhile). Repair: list the threads and use a current id."),
        )
    })
}

/// A row of `sql/thread_facts.sql` (positions: [`at`]).
fn read_facts(r: &Row<'_>) -> Result<ThreadFacts> {
    let row = ThreadRow::from_row(r)?;
    let has = |i: usize| -> Result<bool> { Ok(r.cell(i)? != Cell::Null) };
    let out = if has(at::OUTPUT + output::col::STDERR_DROPPED)? {
        OutputFacts::from_row(r, at::OUTPUT)?
    } else {
        OutputFacts::default()
    };
    let usage = if has(at::USAGE + usage::col::INPUT_TOKENS)? {
        Usage::from_columns(r, at::USAGE)?
    } else {
        Usage::default()
    };
    let live = row.is_live();
    let pending = Pending {
        queue_position: if live {
            r.get(at::QUEUE + queue::position_col::POSITION)?
        } else {
            None
        },
        question: if live && has(at::QUESTION + questions::col::ID)? {
            Some(Question::from_row(r, at::QUESTION)?)
        } else {
            None
        },
        unreachable: if live && has(at::UNREACHABLE + hosts::unreachable_col::HOST_ID)? {
            Some(Unreachable {
                host_id: r.get(at::UNREACHABLE + hosts::unreachable_col::HOST_ID)?,
                since: r.get(at::UNREACHABLE + hosts::unreachable_col::SINCE)?,
            })
        } else {
            None
        },
    };
    let attention = if has(at::ATTENTION + attention::col::THREAD_ID)? {
        Some(Need::from_row(r, at::ATTENTION)?)
    } else {
        None
    };
    let worktree = if has(at::WORKTREE + worktrees::col::THREAD_ID)? {
        Some(WorktreeFacts {
            row: WorktreeRow::from_row(r, at::WORKTREE)?,
            stat: None,
        })
    } else {
        None
    };
    let events = match r.cell(at::FACTS + col::EVENTS)? {
        Cell::Text(text) => events::rows_of_json(text)?,
        Cell::Null => Vec::new(),
        other => {
            return Err(r.unreadable(
                at::FACTS + col::EVENTS,
                &crate::store::db::wrong(other, "text (a JSON array)"),
            ))
        }
    };
    Ok(ThreadFacts {
        row,
        out,
        events,
        usage,
        pending,
        attention,
        worktree,
    })
}

/// What a live thread waits for (issue 30): its queue position and its pending question; two
/// lookups in partial indexes of a handful of rows, none for a closed thread. (Its host's
/// lease is not read: this one serves `top`, which shows hosts its own way.)
pub fn pending_of(conn: &Conn, row: &ThreadRow) -> Result<Pending> {
    if !row.is_live() {
        return Ok(Pending::default());
    }
    Ok(Pending {
        queue_position: queue::position(conn, &row.id)?,
        question: questions::pending_of(conn, &row.id)?,
        unreachable: None,
    })
}

/// The facts of `rows` (in their order), each with its last `recent_events` retained events,
/// in at most eight more queries whatever their number: the retained output of all of them,
/// their events, what each spent, what needs the user (`thread_attention`), their worktrees, and what the
/// live ones wait for (their queue positions,
/// pending questions, and hosts whose lease ran out).
pub fn of_threads(
    conn: &Conn,
    rows: Vec<ThreadRow>,
    recent_events: i64,
    hosts: HostCheck,
) -> Result<Vec<ThreadFacts>> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids = ThreadIds::new(rows.iter().map(|r| &r.id))?;
    let outs = output::of_threads(conn, &ids)?;
    let events = events::rows_of_threads(conn, &ids, recent_events)?;
    let usage = usage::of_threads(conn, &ids)?;
    let pending = pending_of_rows(conn, &rows, hosts)?;
    let needs = attention::of_threads(conn, &ids)?;
    let trees = worktrees::of_threads(conn, &ids)?;
    Ok(rows
        .into_iter()
        .zip(outs)
        .zip(events)
        .zip(usage)
        .zip(pending)
        .zip(needs)
        .zip(trees)
        .map(
            |((((((row, out), events), usage), pending), attention), tree)| ThreadFacts {
                row,
                out,
                events,
                usage,
                pending,
                attention,
                worktree: tree.map(|row| WorktreeFacts { row, stat: None }),
            },
        )
        .collect())
}

/// What each of `rows` waits for, in their order, as [`of_thread`] gives it for one: nothing
/// for a closed thread, and for the live ones their queue positions, their oldest pending
/// questions and their unreachable hosts in three queries over their ids (none when no row
/// is live).
fn pending_of_rows(conn: &Conn, rows: &[ThreadRow], hosts: HostCheck) -> Result<Vec<Pending>> {
    let mut pending = vec![Pending::default(); rows.len()];
    let (live, ids) = live_ids(rows.iter().map(|r| (&r.id, r.is_live())))?;
    if live.is_empty() {
        return Ok(pending);
    }
    let positions = queue::positions_of_threads(conn, &ids)?;
    let asked = questions::pending_of_threads(conn, &ids)?;
    let unreachable = match hosts {
        HostCheck::Look => hosts::unreachable_of(conn, &ids)?,
        HostCheck::OneHost => vec![None; ids.len()],
    };
    for (((at, queue_position), question), unreachable) in
        live.into_iter().zip(positions).zip(asked).zip(unreachable)
    {
        pending[at] = Pending {
            queue_position,
            question,
            unreachable,
        };
    }
    Ok(pending)
}

/// Of `threads` (each id and whether it is live), the places of the live ones and their ids
/// as a batch.
pub fn live_ids<'a>(
    threads: impl Iterator<Item = (&'a ThreadId, bool)>,
) -> Result<(Vec<usize>, ThreadIds)> {
    let (live, ids): (Vec<usize>, Vec<&ThreadId>) = threads
        .enumerate()
        .filter(|(_, (_, live))| *live)
        .map(|(at, (id, _))| (at, id))
        .unzip();
    Ok((live, ThreadIds::new(ids)?))
}
