//! SQLite's page cache grows during a burst of requests (each reader may hold
//! [`READ_CACHE_BUSY_KIB`]) and is cut back to [`PAGE_CACHE_IDLE_KIB`] once requests pause, so
//! a busy serve keeps what a burst reads (issue 12: list `ancestor` over 16 subtrees of a
//! 100k-thread file read ~200 pages from the OS per request with 4 MiB per reader, 8 with
//! 16 MiB, and took 15–20% less) while an idle one holds no more than before (DESIGN: idle RSS
//! ≤ 24 MiB).
//!
//! The bundled SQLite is built with `SQLITE_ENABLE_MEMORY_MANAGEMENT`: every connection of the
//! process shares one page pool, and a connection's `cache_size` only adds to the pool's
//! limit, so lowering it frees nothing while other connections' allowance remains. The trim
//! therefore releases the pool's least recently used pages (`sqlite3_release_memory`) until
//! [`PAGE_CACHE_IDLE_KIB`] remain: the pages of the last requests stay, for the request after
//! a pause (a Pi turn). What SQLite frees goes back to the OS with `malloc_trim`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::store::Store;

/// A reader's page cache while requests come, in KiB.
pub const READ_CACHE_BUSY_KIB: u32 = 16 * 1024;
/// The page cache the process keeps once requests pause, in KiB: the most recently used pages
/// of the last burst (one reader's whole cache before issue 12's change).
pub const PAGE_CACHE_IDLE_KIB: u32 = 4 * 1024;
/// How long without a request counts as a pause.
pub const IDLE_AFTER: Duration = Duration::from_secs(2);

/// Cuts the page cache back after a pause in requests. Each request calls
/// [`ReaderTrim::touch`], which notes the time; the trimming task sleeps until the first
/// request after a trim, then until [`IDLE_AFTER`] has passed since the last request, and
/// trims. Dropping it stops the task.
pub struct ReaderTrim {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

struct Shared {
    /// When the trimmer started: request times are milliseconds since.
    epoch: Instant,
    /// The last request's time, in milliseconds since `epoch`.
    last: AtomicU64,
    /// Reads happened since the last trim (the task is waiting for a pause).
    dirty: AtomicBool,
    wake: Notify,
    /// Trims done (tests).
    trims: AtomicU64,
}

impl ReaderTrim {
    /// Starts the trimming task on the current tokio runtime.
    pub fn start(store: Arc<Store>) -> ReaderTrim {
        Self::start_after(store, IDLE_AFTER)
    }

    /// [`ReaderTrim::start`] with another pause length (tests).
    pub fn start_after(store: Arc<Store>, idle: Duration) -> ReaderTrim {
        let shared = Arc::new(Shared {
            epoch: Instant::now(),
            last: AtomicU64::new(0),
            dirty: AtomicBool::new(false),
            wake: Notify::new(),
            trims: AtomicU64::new(0),
        });
        let s = shared.clone();
        let task = tokio::spawn(async move {
            loop {
                s.wake.notified().await;
                // Until a whole pause has passed since the last request.
                loop {
                    let last = Duration::from_millis(s.last.load(Ordering::Relaxed));
                    let due = s.epoch + last + idle;
                    if Instant::now() >= due {
                        break;
                    }
                    tokio::time::sleep_until(due.into()).await;
                }
                // Cleared before trimming: a request from now on wakes the task again.
                s.dirty.store(false, Ordering::Relaxed);
                let store = store.clone();
                let _ = tokio::task::spawn_blocking(move || store.trim_page_cache()).await;
                s.trims.fetch_add(1, Ordering::Relaxed);
            }
        });
        ReaderTrim { shared, task }
    }

    /// Notes a request: a clock read and an atomic store; only the first request after a trim
    /// wakes the task.
    pub fn touch(&self) {
        let s = &self.shared;
        let now = s.epoch.elapsed().as_millis() as u64;
        s.last.store(now, Ordering::Relaxed);
        if !s.dirty.load(Ordering::Relaxed) && !s.dirty.swap(true, Ordering::Relaxed) {
            s.wake.notify_one();
        }
    }
}

impl Drop for ReaderTrim {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Bytes of page cache SQLite holds in this process (every connection: one pool).
pub fn page_cache_bytes() -> i64 {
    let (mut cur, mut high) = (0i64, 0i64);
    // SAFETY: sqlite3_status64 only reads SQLite's counters into the two valid locals.
    unsafe {
        rusqlite::ffi::sqlite3_status64(
            rusqlite::ffi::SQLITE_STATUS_PAGECACHE_OVERFLOW,
            &mut cur,
            &mut high,
            0,
        );
    }
    cur
}

impl Store {
    /// Releases the least recently used pages of SQLite's page cache (pages in use stay) until
    /// [`PAGE_CACHE_IDLE_KIB`] remain, and hands the freed memory back to the OS.
    pub fn trim_page_cache(&self) {
        let excess = page_cache_bytes() - (i64::from(PAGE_CACHE_IDLE_KIB) << 10);
        if excess > 0 {
            let n = i32::try_from(excess).unwrap_or(i32::MAX);
            // SAFETY: sqlite3_release_memory takes the page pool's own mutex and frees only
            // unpinned pages; it is safe while other connections run.
            unsafe {
                rusqlite::ffi::sqlite3_release_memory(n);
            }
        }
        super::release_freed_memory();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of page cache `conn` holds (`SQLITE_DBSTATUS_CACHE_USED`).
    fn cache_used(conn: &crate::store::Conn) -> i64 {
        let conn = conn.sqlite().unwrap();
        let (mut cur, mut high) = (0, 0);
        // SAFETY: the handle is a live connection borrowed for the call; the out-pointers are
        // valid locals.
        let rc = unsafe {
            rusqlite::ffi::sqlite3_db_status(
                conn.handle(),
                rusqlite::ffi::SQLITE_DBSTATUS_CACHE_USED,
                &mut cur,
                &mut high,
                0,
            )
        };
        assert_eq!(rc, rusqlite::ffi::SQLITE_OK);
        i64::from(cur)
    }

    const MIB: i64 = 1 << 20;

    /// The page pool is the process's: these tests take turns, so one's trim does not cut the
    /// other's cache between a read and its check.
    static POOL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    const KEPT: i64 = (PAGE_CACHE_IDLE_KIB as i64) << 10;

    /// A store with ~24 MiB of pages (more than a busy reader's cache).
    fn store() -> (tempfile::TempDir, Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path().join("t.sqlite")).unwrap());
        store
            .write(|tx| {
                tx.sqlite()
                    .unwrap()
                    .execute_batch("CREATE TABLE bulk(x BLOB)")?;
                let mut ins = tx
                    .sqlite()
                    .unwrap()
                    .prepare("INSERT INTO bulk VALUES (zeroblob(3000))")?;
                for _ in 0..8000 {
                    ins.execute([])?;
                }
                Ok(())
            })
            .unwrap();
        (dir, store)
    }

    /// Reads every page of `bulk` on `conn`, as a burst of requests would.
    fn read_all(conn: &crate::store::Conn) {
        let conn = conn.sqlite().unwrap();
        let n: i64 = conn
            .query_row("SELECT sum(length(x)) FROM bulk", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 8000 * 3000);
    }

    #[test]
    fn a_reader_grows_past_the_idle_size_and_a_trim_cuts_it_back() {
        let _turn = POOL.blocking_lock();
        let (_dir, store) = store();
        let conn = store.read().unwrap();
        read_all(&conn);
        let busy = cache_used(&conn);
        assert!(
            busy > 12 * MIB,
            "a busy reader keeps up to {READ_CACHE_BUSY_KIB} KiB: {busy}"
        );
        store.trim_page_cache();
        let idle = cache_used(&conn);
        assert!(idle <= KEPT + MIB, "after a trim: {idle}");
        // The pages kept are the last ones read, and the limit is unchanged: the next burst
        // grows the cache again.
        read_all(&conn);
        assert!(cache_used(&conn) > 12 * MIB);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pause_in_requests_trims_and_requests_do_not() {
        let _turn = POOL.lock().await;
        let (_dir, store) = store();
        // A pause of a second: a 50 ms sleep on a loaded machine (the rest of the suite runs
        // beside it on two cores) overran a 200 ms one.
        let trim = ReaderTrim::start_after(store.clone(), Duration::from_secs(1));
        let trims = || trim.shared.trims.load(Ordering::Relaxed);
        let conn = store.read().unwrap();
        for round in 1..=2 {
            read_all(&conn);
            // Requests every 50 ms: no second passes without one.
            for _ in 0..10 {
                trim.touch();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            assert_eq!(trims(), round - 1, "trimmed while requests came");
            // Then a pause: one trim, which cuts the cache back.
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while trims() < round {
                assert!(
                    std::time::Instant::now() < deadline,
                    "no trim after a pause"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert!(cache_used(&conn) <= KEPT + MIB);
            tokio::time::sleep(Duration::from_millis(1500)).await;
            assert_eq!(trims(), round, "a trim without requests since the last one");
        }
    }
}
