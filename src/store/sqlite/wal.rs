//! Keeping the WAL bounded while serves write and readers read without pause.
//!
//! SQLite's own rule (its autocheckpoint) is a PASSIVE checkpoint after every commit that leaves
//! the WAL at 1000 pages or more. A passive checkpoint copies back only the frames no reader
//! still needs, and the WAL starts over from its beginning only when a writer begins while every
//! frame is copied back and no reader holds an old snapshot. With eight serves committing and
//! readers (`top`, `threadbase sql`, polls) always overlapping, that moment can fail to come for
//! a long while on a loaded machine: the WAL then grows with the load (10.3 MiB in a CI run of
//! `tests/it/many_writers.rs`, 7.5 MiB here under CPU and fsync load, against 4.6 MiB idle).
//!
//! So the writer connection keeps SQLite's rule and adds one: a commit that leaves the WAL at
//! [`RESTART_PAGES`] or more runs a RESTART checkpoint, which holds off other writers, waits (at
//! most [`RESTART_WAIT`]) for readers of old snapshots to finish, copies every frame back and
//! makes the next writer start the WAL over. A reader that outlasts the wait (a list of every
//! thread of a big manager, a long `threadbase sql`) only makes it give up; the next try comes
//! [`RESTART_BACKOFF`] later, so a long read never slows every write.
//!
//! SQLite tells the page count only to a WAL hook, which runs inside the commit; the hook notes
//! it in a thread-local and [`Store::write`](super::Store::write) acts on it once the commit has
//! returned (the checkpoint needs the connection, which the hook cannot reach).

use std::cell::Cell;
use std::time::{Duration, Instant};

use super::BUSY_TIMEOUT;

/// SQLite's autocheckpoint threshold, kept: a passive checkpoint from this many pages.
pub const CHECKPOINT_PAGES: i32 = 1000;
/// From this many pages (6 MiB of 4 KiB pages) a commit runs a RESTART checkpoint.
pub const RESTART_PAGES: i32 = 1536;
/// How long a RESTART checkpoint waits for a writer or for readers of old snapshots.
pub const RESTART_WAIT: Duration = Duration::from_millis(250);
/// After a RESTART checkpoint that had to give up, the next try waits this long.
pub const RESTART_BACKOFF: Duration = Duration::from_secs(1);

thread_local! {
    /// The WAL's page count after this thread's last commit on a writer connection (0: none).
    static WAL_PAGES: Cell<i32> = const { Cell::new(0) };
}

/// The WAL hook of a writer connection: notes the WAL's size for [`Checkpoints::after_commit`].
/// Setting it turns SQLite's autocheckpoint off; `after_commit` does its work instead.
pub fn watch(conn: &rusqlite::Connection) {
    conn.wal_hook(Some(|_wal, pages| {
        WAL_PAGES.set(pages);
        Ok(())
    }));
}

/// What a writer connection remembers between commits.
#[derive(Debug, Default)]
pub struct Checkpoints {
    /// No RESTART checkpoint before this instant (set when one gave up).
    restart_after: Option<Instant>,
    /// What the last commit ran, and the WAL's pages it left.
    pub last: Ran,
    pub pages: i32,
}

/// Which checkpoint a commit ran.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    #[default]
    None,
    Passive,
    /// A RESTART checkpoint that finished: the next writer starts the WAL over.
    Restart,
    /// A RESTART checkpoint that gave up (a writer or an old reader outlasted the wait).
    RestartGaveUp,
}

impl Checkpoints {
    /// Checkpoints as the module doc says, after a commit on `conn` (the writer connection, in
    /// autocommit mode). A failed checkpoint loses nothing (the frames stay in the WAL), so it
    /// is logged and the commit's result stands.
    pub fn after_commit(&mut self, conn: &rusqlite::Connection) {
        self.last = self.run(conn);
    }

    fn run(&mut self, conn: &rusqlite::Connection) -> Ran {
        let pages = WAL_PAGES.replace(0);
        self.pages = pages;
        if pages < CHECKPOINT_PAGES {
            return Ran::None;
        }
        let due = pages >= RESTART_PAGES && self.restart_after.is_none_or(|t| Instant::now() >= t);
        if !due {
            if let Err(e) = checkpoint(conn, "PASSIVE") {
                tracing::debug!("passive checkpoint at {pages} WAL pages: {e}");
            }
            return Ran::Passive;
        }
        match restart(conn) {
            Ok(true) => {
                self.restart_after = None;
                Ran::Restart
            }
            Ok(false) | Err(_) => {
                self.restart_after = Some(Instant::now() + RESTART_BACKOFF);
                Ran::RestartGaveUp
            }
        }
    }
}

/// A RESTART checkpoint, tried again until it finishes or [`RESTART_WAIT`] has passed: SQLite
/// waits in the busy handler for the writer lock and for readers, but not for another
/// connection's checkpoint (a passive one after another serve's commit), which makes it give up
/// at once.
fn restart(conn: &rusqlite::Connection) -> rusqlite::Result<bool> {
    let began = Instant::now();
    loop {
        let left = RESTART_WAIT.saturating_sub(began.elapsed());
        if left.is_zero() {
            return Ok(false);
        }
        let _ = conn.busy_timeout(left);
        let done = checkpoint(conn, "RESTART");
        let _ = conn.busy_timeout(BUSY_TIMEOUT);
        match done {
            Ok(true) => return Ok(true),
            Ok(false) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => {
                tracing::debug!("restart checkpoint: {e}");
                return Err(e);
            }
        }
    }
}

/// How long a closing store waits, at most, for another connection's read or write to end
/// before its TRUNCATE checkpoint gives up (a process that keeps reading keeps its WAL).
const SETTLE_WAIT: Duration = Duration::from_millis(250);

/// A TRUNCATE checkpoint that hardly waits: every frame is copied into the database file and
/// the WAL is emptied, unless another connection keeps reading or writing for [`SETTLE_WAIT`]
/// (a read of this process's own background work, or another process's: then nothing
/// happens). True when the WAL is empty after it.
pub fn truncate_now(conn: &rusqlite::Connection) -> bool {
    let _ = conn.busy_timeout(Duration::ZERO);
    let deadline = std::time::Instant::now() + SETTLE_WAIT;
    let done = loop {
        match checkpoint(conn, "TRUNCATE") {
            Ok(true) => break true,
            Ok(false) | Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10))
            }
            _ => break false,
        }
    };
    let _ = conn.busy_timeout(BUSY_TIMEOUT);
    done
}

/// Runs `PRAGMA wal_checkpoint(mode)`; true when it finished (its first column, `busy`, is 0).
fn checkpoint(conn: &rusqlite::Connection, mode: &str) -> rusqlite::Result<bool> {
    conn.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|busy| busy == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    /// A store whose WAL is held from checkpoints by a reader, and that reader.
    fn store_with_a_held_wal(dir: &std::path::Path) -> (Store, crate::store::OpenConn) {
        let store = Store::open(dir.join("t.sqlite")).unwrap();
        store
            .write(|tx| {
                Ok(tx
                    .sqlite()
                    .unwrap()
                    .execute_batch("CREATE TABLE filler(k INTEGER PRIMARY KEY, v BLOB)")?)
            })
            .unwrap();
        let reader = crate::store::open_read_only(dir.join("t.sqlite")).unwrap();
        reader.sqlite().unwrap().execute_batch("BEGIN").unwrap();
        let _: i64 = reader
            .sqlite()
            .unwrap()
            .query_row("SELECT count(*) FROM filler", [], |r| r.get(0))
            .unwrap();
        (store, reader)
    }

    /// Commits about four pages; returns what the commit ran and the pages it left.
    fn commit(store: &Store, k: i64) -> (Ran, i32) {
        store
            .write(|tx| {
                tx.sqlite().unwrap().execute(
                    "INSERT OR REPLACE INTO filler(k, v) VALUES (?1, zeroblob(12000))",
                    [k % 64],
                )?;
                Ok(())
            })
            .unwrap();
        store.checkpoint_state()
    }

    /// Commits until the WAL reaches `pages`; returns what each commit ran.
    fn grow_to(store: &Store, pages: i32) -> Vec<Ran> {
        let mut ran = Vec::new();
        for k in 0.. {
            let (r, p) = commit(store, k);
            ran.push(r);
            if p >= pages {
                break;
            }
        }
        ran
    }

    /// While a reader holds an old snapshot, SQLite's rule applies (passive checkpoints from
    /// 1000 pages, which cannot free the WAL); the commit that takes the WAL to the restart
    /// threshold waits for that reader to finish, and the next commit starts the WAL over.
    #[test]
    fn a_commit_past_the_threshold_waits_for_old_readers_and_the_wal_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let (store, reader) = store_with_a_held_wal(dir.path());
        let ran = grow_to(&store, RESTART_PAGES - 8);
        assert!(
            ran.contains(&Ran::Passive) && !ran.contains(&Ran::Restart),
            "{ran:?}"
        );
        let ends = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(60));
            reader.sqlite().unwrap().execute_batch("COMMIT").unwrap();
        });
        let began = Instant::now();
        let mut k = 10_000;
        let ran = loop {
            let (ran, pages) = commit(&store, k);
            k += 1;
            if pages >= RESTART_PAGES {
                break ran;
            }
        };
        let waited = began.elapsed();
        ends.join().unwrap();
        assert_eq!(ran, Ran::Restart);
        assert!(waited >= Duration::from_millis(50), "{waited:?}");
        let (_, pages) = commit(&store, k);
        assert!(pages <= 8, "the WAL did not start over: {pages} pages");
    }

    /// A reader that outlasts the wait makes the checkpoint give up, not the commit: the write
    /// stands, the commits during the back-off run passive checkpoints (no wait), and the first
    /// commit after the back-off, with the reader gone, restarts the WAL.
    #[test]
    fn a_reader_that_outlasts_the_wait_costs_one_wait_per_back_off() {
        let dir = tempfile::tempdir().unwrap();
        let (store, reader) = store_with_a_held_wal(dir.path());
        grow_to(&store, RESTART_PAGES - 8);
        let began = Instant::now();
        let mut ran = Vec::new();
        let mut k = 10_000;
        while ran.last() != Some(&Ran::RestartGaveUp) {
            ran.push(commit(&store, k).0);
            k += 1;
        }
        assert!(began.elapsed() >= RESTART_WAIT);
        let stored: i64 = store
            .read()
            .unwrap()
            .sqlite()
            .unwrap()
            .query_row("SELECT count(*) FROM filler", [], |r| r.get(0))
            .unwrap();
        assert_eq!(stored, 64);
        let quick = Instant::now();
        for _ in 0..5 {
            assert_eq!(commit(&store, k).0, Ran::Passive);
            k += 1;
        }
        assert!(quick.elapsed() < RESTART_WAIT, "{:?}", quick.elapsed());
        reader.sqlite().unwrap().execute_batch("COMMIT").unwrap();
        std::thread::sleep(RESTART_BACKOFF);
        assert_eq!(commit(&store, k).0, Ran::Restart);
        assert!(commit(&store, k + 1).1 <= 8);
    }
}
