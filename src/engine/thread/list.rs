//! `list`: the filter's target resolved to a subtree, then the answer written as the rows are
//! read (`contract::list_answer`): one read transaction, a batch of rows at a time whatever
//! the list's length. A listed thread's answer is copied when this serve keeps it in memory
//! (`engine/cache.rs`); the others are rendered from their facts, a batch in five queries,
//! and the still ones among them kept.

use super::Engine;
use crate::contract::list_answer::{self, ListRows, Rendered, BATCH};
use crate::contract::projection::recent_event_count;
use crate::contract::projection::Detail;
use crate::contract::thread::ListTarget;
use crate::domain::{ManagerId, ThreadId};
use crate::engine::cache::{self, Answers, Key, Stamp};
use crate::engine::Reply;
use crate::error::Result;
use crate::store::facts::HostCheck;
use crate::store::list::{self, ListQuery, Subtree};
use crate::store::refs::resolve_list_filter;
use crate::store::Conn;

/// Rows a pass over a list reads on the request's worker: the rest of a longer one runs in
/// `block_in_place`, since writing it may wait for serve's writer.
const ON_WORKER: usize = 16;

pub(in crate::engine) fn list(e: &Engine, req: crate::contract::thread::List) -> Result<Reply> {
    let crate::contract::thread::List {
        state,
        visibility,
        target,
    } = req;
    let subtree = {
        let conn = e.store.read()?;
        match target {
            Some(ListTarget::Parent(p)) => {
                Subtree::ChildrenOf(resolve_list_filter(&conn, e.scope(), &p)?)
            }
            Some(ListTarget::Ancestor(a)) => {
                Subtree::DescendantsOf(resolve_list_filter(&conn, e.scope(), &a)?)
            }
            None => Subtree::Everything,
        }
    };
    let q = ListQuery {
        state,
        visibility,
        subtree,
    };
    let (store, manager_id, wire) = (e.store.clone(), e.manager_id, e.cfg.wire);
    let answers = e.cache.clone();
    Ok(Reply::Stream(Box::new(move |id, w| {
        // Read before the rows: an answer rendered from rows that changed after it is never
        // kept.
        let at = answers.stamp();
        let conn = store.read()?;
        // One read transaction: every pass sees the same rows.
        let tx = crate::store::ReadTx::begin(&conn)?;
        let mut rows = Rows {
            conn: &tx,
            manager_id,
            q: &q,
            answers: &answers,
            at,
            hosts: HostCheck::of(store.hosts_to_check()),
        };
        // Each pass moves off the worker itself once it is long (`list::each_row_switching`).
        list_answer::write(wire, id, &mut rows, w)
    })))
}

/// A list's rows in one read transaction.
struct Rows<'a> {
    conn: &'a Conn,
    manager_id: ManagerId,
    q: &'a ListQuery,
    /// This serve's kept answers, and where the database stood before the rows were read.
    answers: &'a Answers,
    at: Option<Stamp>,
    /// Whether live threads may be held on a host whose lease ran out.
    hosts: HostCheck,
}

impl ListRows for Rows<'_> {
    fn count(&mut self) -> Result<(usize, usize)> {
        let (mut count, mut live) = (0, 0);
        list::each_row_switching(self.conn, self.manager_id, self.q, ON_WORKER, |r| {
            if let Some(r) = r {
                count += 1;
                live += usize::from(r.live()?);
            }
            Ok(true)
        })?;
        Ok((count, live))
    }

    fn batches(&mut self, f: &mut dyn FnMut(Vec<Rendered>, bool) -> Result<bool>) -> Result<()> {
        let conn = self.conn;
        let (answers, at) = (self.answers, self.at);
        let hosts = self.hosts;
        let mut batch: Vec<Entry> = Vec::with_capacity(BATCH);
        // Past ON_WORKER rows the rest of the pass, the last batch included, runs off the
        // worker (see `list::each_row_switching`).
        list::each_row_switching(conn, self.manager_id, self.q, ON_WORKER, |r| {
            let last = r.is_none();
            if let Some(r) = r {
                let id = r.id()?;
                batch.push(match answers.get(&Key::Listed(id.clone()), at) {
                    Some(kept) => {
                        let id = if kept.live { Some(id) } else { None };
                        Entry::Kept(kept, id)
                    }
                    None => Entry::Fresh(id),
                });
                if batch.len() < BATCH {
                    return Ok(true);
                }
            }
            f(
                rendered(
                    conn,
                    unkept_if_unreachable(conn, std::mem::take(&mut batch), hosts)?,
                    (answers, at),
                    hosts,
                )?,
                last,
            )
        })
    }
}

/// A listed thread as its list row found it: its kept answer (with its id when live), or its
/// id (its row is read and its answer rendered, a batch at a time).
enum Entry {
    Kept(Rendered, Option<ThreadId>),
    Fresh(ThreadId),
}

/// `entries` with the kept answers of live threads whose host's lease ran out (issue 33) made
/// fresh again: they are rendered saying so. A kept answer of a live thread (an idle one) was
/// rendered while its host was up, and no row changes when a host stops beating. One query
/// for a batch with a kept live thread, none otherwise (a list of closed threads).
fn unkept_if_unreachable(
    conn: &Conn,
    mut entries: Vec<Entry>,
    hosts: HostCheck,
) -> Result<Vec<Entry>> {
    if hosts == HostCheck::OneHost {
        return Ok(entries);
    }
    let live: Vec<(usize, &ThreadId)> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            Entry::Kept(_, id) => Some((i, id.as_ref()?)),
            _ => None,
        })
        .collect();
    if live.is_empty() {
        return Ok(entries);
    }
    let ids = crate::store::ThreadIds::new(live.iter().map(|(_, id)| *id))?;
    let unreachable = crate::store::hosts::unreachable_of(conn, &ids)?;
    let fresh: Vec<(usize, ThreadId)> = live
        .into_iter()
        .zip(unreachable)
        .filter(|(_, u)| u.is_some())
        .map(|((i, id), _)| (i, id.clone()))
        .collect();
    for (i, id) in fresh {
        entries[i] = Entry::Fresh(id);
    }
    Ok(entries)
}

/// Each entry's answer, in order: kept ones as the list row carried them, the others rendered
/// from their rows and facts (five queries for all of them) and, when still (closed, or live
/// and idle), kept in this serve's memory.
fn rendered(
    conn: &Conn,
    entries: Vec<Entry>,
    (answers, at): (&Answers, Option<Stamp>),
    hosts: HostCheck,
) -> Result<Vec<Rendered>> {
    let mut fresh_at = Vec::new();
    let mut fresh = Vec::new();
    let mut listed = Vec::with_capacity(entries.len());
    for (i, e) in entries.into_iter().enumerate() {
        match e {
            Entry::Kept(answer, _) => listed.push(answer),
            Entry::Fresh(id) => {
                fresh_at.push(i);
                fresh.push(id);
                listed.push(Rendered::default());
            }
        }
    }
    if !fresh.is_empty() {
        let rows = list::rows_by_ids(conn, &fresh)?;
        for (i, f) in fresh_at.into_iter().zip(crate::store::facts::of_threads(
            conn,
            rows,
            recent_event_count(Detail::Summary),
            hosts,
        )?) {
            listed[i] = list_answer::render(&f)?;
            if cache::keepable(&f, false) {
                answers.put(Key::Listed(f.row.id.clone()), &listed[i], at);
            }
        }
    }
    Ok(listed)
}
