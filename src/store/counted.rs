//! The statements the store runs for one request, counted (issue 46: a poll costs one or two
//! statements and writes nothing; `tests/it/thread/reads.rs` asserts it through `serve`, which
//! counts each request's when `THREADBASE_TEST_COUNT_STATEMENTS=1`).
//!
//! A count is kept only inside [`count`]'s future (a tokio task-local): every statement the
//! store runs on that task's behalf, wherever its worker thread, bumps it; outside a count a
//! statement costs one thread-local look-up. Counted: each query of `sql/` and ad hoc statement
//! ([`super::Conn`]'s), a read transaction's `BEGIN` and `COMMIT`, and each write transaction
//! (its `BEGIN` and `COMMIT` as statements, and once as a write). Not counted: the change
//! counter a kept answer is checked against (`Conn::data_version`: SQLite's `PRAGMA
//! data_version` reads no table; PostgreSQL's is the notifications already received, no
//! round trip), nor what other tasks run meanwhile (a child's reader applying a `get_state`
//! answer, the heartbeat).

use std::cell::Cell;
use std::future::Future;

tokio::task_local! {
    static COUNTS: Cell<Counts>;
}

/// What one request ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Statements: queries of `sql/`, ad hoc ones, and transactions' `BEGIN`/`COMMIT`.
    pub statements: u64,
    /// Write transactions begun.
    pub writes: u64,
}

/// Runs `f`, counting the statements the store runs for it.
pub async fn count<F: Future>(f: F) -> (F::Output, Counts) {
    COUNTS
        .scope(Cell::new(Counts::default()), async move {
            let out = f.await;
            (out, COUNTS.with(Cell::get))
        })
        .await
}

/// Adds `statements` statements and `writes` writes to the count under way, if any.
pub(in crate::store) fn add(statements: u64, writes: u64) {
    let _ = COUNTS.try_with(|c| {
        let n = c.get();
        c.set(Counts {
            statements: n.statements + statements,
            writes: n.writes + writes,
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_count_holds_what_ran_inside_it_only() {
        add(5, 5);
        let ((), n) = count(async {
            add(2, 0);
            tokio::task::yield_now().await;
            add(1, 1);
        })
        .await;
        assert_eq!(
            n,
            Counts {
                statements: 3,
                writes: 1
            }
        );
    }
}
