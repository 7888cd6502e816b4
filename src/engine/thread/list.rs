//! `list`: the filter's target resolved to a subtree, then the answer written as the rows are
//! read (`contract::list_answer`): one read transaction, a batch of rows and their facts at a
//! time, whatever the list's length.

use super::{scope, Engine};
use crate::contract::list_answer::{self, ListRows, BATCH};
use crate::contract::projection::{Detail, ThreadFacts};
use crate::contract::thread::ListTarget;
use crate::contract::Wire;
use crate::domain::ManagerId;
use crate::engine::thread_facts;
use crate::error::Result;
use crate::serve::output::Reply;
use crate::store::list::{self, ListQuery, Subtree};
use crate::store::refs::resolve_list_filter;
use crate::store::Conn;

/// Rows a list reads on the request's worker: a longer list moves the worker's other tasks
/// away first (`block_in_place`), since writing it may wait for serve's writer.
const ON_WORKER: usize = 16;

pub(super) fn list_threads(
    e: &Engine,
    state: crate::store::list::StateFilter,
    visibility: crate::store::list::VisibilityFilter,
    target: Option<ListTarget>,
) -> Result<Reply> {
    let subtree = {
        let conn = e.store.read()?;
        match target {
            Some(ListTarget::Parent(p)) => {
                Subtree::ChildrenOf(resolve_list_filter(&conn, scope(e), &p)?)
            }
            Some(ListTarget::Ancestor(a)) => {
                Subtree::DescendantsOf(resolve_list_filter(&conn, scope(e), &a)?)
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
    Ok(Reply::Stream(Box::new(move |id, w| {
        let conn = store.read()?;
        // One read transaction: every pass sees the same rows.
        let tx = crate::store::ReadTx::begin(&conn)?;
        let mut rows = Rows {
            conn: &tx,
            manager_id,
            q: &q,
        };
        let out = match wire {
            // The contract's form counts first: a short list stays on this worker.
            Wire::Contract => {
                let counts = rows.count()?;
                let mut write = || list_answer::write(wire, id, Some(counts), &mut rows, w);
                if counts.0 <= ON_WORKER {
                    write()
                } else {
                    off_worker(write)
                }
            }
            // One pass, which moves off the worker itself once it is long (`Rows::batches`).
            Wire::Compact => list_answer::write(wire, id, None, &mut rows, w),
        };
        drop(tx);
        out
    })))
}

/// Runs `f` where it may block: in `block_in_place` on a worker of a multi-thread runtime.
fn off_worker<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// A list's rows in one read transaction.
struct Rows<'a> {
    conn: &'a Conn,
    manager_id: ManagerId,
    q: &'a ListQuery,
}

impl ListRows for Rows<'_> {
    fn count(&mut self) -> Result<(usize, usize)> {
        let (mut count, mut live) = (0, 0);
        list::each_row(self.conn, self.manager_id, self.q, |r| {
            count += 1;
            live += usize::from(r.live()?);
            Ok(true)
        })?;
        Ok((count, live))
    }

    fn batches(&mut self, f: &mut dyn FnMut(Vec<ThreadFacts>) -> Result<()>) -> Result<()> {
        let conn = self.conn;
        let mut ids: Vec<String> = Vec::with_capacity(BATCH);
        // Past ON_WORKER rows the rest of the pass, the last batch included, runs off the
        // worker (see `list::each_row_switching`).
        list::each_row_switching(conn, self.manager_id, self.q, ON_WORKER, |r| {
            if let Some(r) = r {
                ids.push(r.id()?);
                if ids.len() < BATCH {
                    return Ok(true);
                }
            }
            if !ids.is_empty() {
                let batch: Vec<&str> = ids.iter().map(String::as_str).collect();
                let rows = list::rows_by_ids(conn, &batch)?;
                f(thread_facts(conn, rows, Detail::Summary)?)?;
                ids.clear();
            }
            Ok(true)
        })
    }
}
