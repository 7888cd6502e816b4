//! The SQLite backend, beside `store/postgres/`: one file, WAL, one writer, a pool of readers.
//!
//! Opening sets WAL once (before the pool exists), runs the embedded refinery migrations under
//! a file lock so concurrent first opens do not race ([`open`]), and then hands out reader
//! connections from an r2d2 pool. Every write goes through [`SqliteStore::write`], which starts
//! `BEGIN IMMEDIATE` so a writer takes the lock up front and waits in the busy handler instead
//! of failing with `database is locked` when it would upgrade a read; after each commit the
//! writer checkpoints ([`wal`]). A connection runs the store's queries through [`conn`]; the
//! page cache is trimmed after a pause ([`trim`]); SQLite's failures become the store's errors
//! ([`errors`]).

pub(super) mod conn;
pub(super) mod errors;
pub(super) mod open;
pub(super) mod trim;
pub(super) mod wal;

use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use r2d2_sqlite::SqliteConnectionManager;
pub use rusqlite::Connection;
use rusqlite::{OpenFlags, TransactionBehavior};

pub(super) use errors::no_row;
use open::{folder_refusal, holds, migrate, not_threadbase, open_error, Holds};
use trim::READ_CACHE_BUSY_KIB;

use crate::error::{Error, Result};
use crate::store::Conn;

/// How long a connection waits for a lock held by another connection or process.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// A reader of the pool, while it is held.
pub type Reader = r2d2::PooledConnection<SqliteConnectionManager>;

/// An open SQLite file: the writer connection with its checkpoints, and the reader pool.
pub struct SqliteStore {
    writer: Mutex<Writer>,
    readers: r2d2::Pool<SqliteConnectionManager>,
}

/// The writer connection and what it remembers about checkpoints ([`wal`]).
struct Writer {
    conn: Connection,
    checkpoints: wal::Checkpoints,
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // Query planner stability guarantee: a plan never depends on bound values. Without it SQLite
    // reads the value bound to a `LIMIT ?` while planning and marks the statement stale whenever
    // that parameter is rebound, so each call of a cached statement with a LIMIT parameter (the
    // task-name step of reference resolution, the unknown-reference listing) re-prepared it, at
    // tens of µs a time. tests/it/query_plans.rs checks the hot statements are never re-prepared.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    // journal_size_limit: a WAL that grew while long reads held it (a list of every thread of a
    // big manager, while the snapshot cache's filler wrote) is cut back to 64 MiB at the next
    // checkpoint that resets it, instead of keeping its largest size on disk.
    conn.execute_batch(
        "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA journal_size_limit = 67108864;",
    )?;
    // Room for every query in sql/ (about 70) and then some: a long-lived connection that
    // evicted a hot statement would pay a full prepare on its next use.
    conn.set_prepared_statement_cache_capacity(128);
    Ok(())
}

impl SqliteStore {
    /// Opens (creating it when `create`) the file at `path` and brings its schema up to date;
    /// another program's database is refused untouched, never migrated.
    pub fn open(path: &Path, create: bool) -> Result<SqliteStore> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                Error::io(format!(
                    "Cannot create the database folder {}: {e}. Repair: create it by hand or pass --db with a writable location.",
                    parent.display()
                ))
            })?;
        }
        let mut writer = Connection::open(path)
            .map_err(|e| folder_refusal(path).unwrap_or_else(|| open_error(path, e)))?;
        // SQLite falls back to a read-only handle when the file cannot be opened for writing;
        // refuse that up front with the reason, instead of failing at the first write.
        if writer.is_readonly(rusqlite::MAIN_DB)? {
            let why = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .err()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default();
            return Err(Error::io(format!(
                "The database {} cannot be opened for writing{why}; nothing was written. Repair: make the file (and its folder, which holds the -wal and -shm files) writable for this user, or pass --db with a writable path; the read-only commands (list, tree, show, events, sql, check) still work on it.",
                path.display()
            ))
            .naming_database());
        }
        // The first reads of the file (the schema) open its -wal and -shm files,
        // which a folder that takes no new file refuses: said as such, not as a bare error.
        let refused = |e: Error| match e.code {
            crate::error::ErrorCode::Io => folder_refusal(path).unwrap_or(e),
            _ => e,
        };
        configure(&writer).map_err(|e| refused(e.into()))?;
        match holds(&writer).map_err(|e| refused(open_error(path, e)))? {
            Holds::Threadbase => {}
            Holds::Nothing if create => {}
            holds => return Err(not_threadbase(path, &holds)),
        }
        migrate(&mut writer, path).map_err(refused)?;
        wal::watch(&writer);
        let manager = SqliteConnectionManager::file(path)
            .with_flags(
                OpenFlags::SQLITE_OPEN_READ_WRITE
                    | OpenFlags::SQLITE_OPEN_NO_MUTEX
                    | OpenFlags::SQLITE_OPEN_URI,
            )
            .with_init(|c| {
                configure(c)?;
                // A reader's page cache grows to 16 MiB while requests come (SQLite's default
                // is 2 MiB) and is cut back to 4 MiB after a pause (`ReaderTrim`). r2d2 hands
                // out the most recently returned connection, so one-at-a-time requests keep one
                // reader's cache warm: at 1 MiB a list of 10 from a 10k-thread file re-read its
                // event and output pages every time (602 us, 300 us at 8 MiB), and list
                // `ancestor` over 16 subtrees of a 100k-thread file read ~200 pages per request
                // from the OS at 4 MiB (8 at 16 MiB).
                c.execute_batch(&format!(
                    "PRAGMA query_only = ON; PRAGMA cache_size = -{READ_CACHE_BUSY_KIB};"
                ))
            });
        let readers = r2d2::Pool::builder()
            .max_size(8)
            .min_idle(Some(1))
            // A local SQLite connection does not go stale like a network one; r2d2's check on
            // every checkout (an empty `execute_batch`) cost ~6.5k instructions, twice a poll.
            .test_on_check_out(false)
            .connection_timeout(BUSY_TIMEOUT)
            .build(manager)?;
        Ok(SqliteStore {
            writer: Mutex::new(Writer {
                conn: writer,
                checkpoints: wal::Checkpoints::default(),
            }),
            readers,
        })
    }

    /// A reader from the pool.
    pub fn read(&self) -> Result<Reader> {
        Ok(self.readers.get()?)
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction on the writer connection; commits when it
    /// returns `Ok` and then checkpoints as [`wal`] says, rolls back otherwise.
    pub fn write<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let Writer { conn, checkpoints } = &mut *writer;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let out = f(Conn::of(&tx))?;
        tx.commit()?;
        checkpoints.after_commit(conn);
        Ok(out)
    }

    /// Empties the WAL into the file now, if no other connection is using it ([`wal::truncate_now`]).
    pub fn settle_wal(&self) -> bool {
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        wal::truncate_now(&writer.conn)
    }

    /// Which checkpoint the last write ran, and the WAL pages it left.
    #[cfg(test)]
    pub(super) fn checkpoint_state(&self) -> (wal::Ran, i32) {
        let w = self.writer.lock().unwrap();
        (w.checkpoints.last, w.checkpoints.pages)
    }
}

/// A read-only connection to the file at `path`, apart from the pool (a change watch's).
pub fn open_watch(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

/// `PRAGMA integrity_check(100)`'s findings (`["ok"]` when the file is whole): `threadbase
/// check`'s first look. `None` on PostgreSQL, whose server checks its own pages.
pub fn integrity_check(conn: &Conn) -> Result<Option<Vec<String>>> {
    pragma(conn, "PRAGMA integrity_check(100)", |r| r.get(0))
}

/// A row `PRAGMA foreign_key_check` found: its table, its rowid and the table it refers to.
pub type ForeignKeyFault = (String, Option<i64>, String);

/// `PRAGMA foreign_key_check`'s rows. `None` on PostgreSQL, whose foreign keys are never off.
pub fn foreign_key_check(conn: &Conn) -> Result<Option<Vec<ForeignKeyFault>>> {
    pragma(conn, "PRAGMA foreign_key_check", |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })
}

/// The rows of `sql`, a PRAGMA, each as `f` reads it; `None` on another backend.
fn pragma<T>(
    conn: &Conn,
    sql: &str,
    f: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Option<Vec<T>>> {
    let Some(db) = conn.sqlite() else {
        return Ok(None);
    };
    let rows = db
        .prepare(sql)?
        .query_map([], f)?
        .collect::<rusqlite::Result<_>>();
    Ok(Some(rows?))
}

/// Hands memory SQLite freed back to the OS: it stays in the allocator's arenas otherwise.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}
