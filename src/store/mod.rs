//! The SQLite store: one file, WAL, one writer, a pool of readers.
//!
//! Opening sets WAL once (before the pool exists), runs the embedded refinery migrations under
//! a file lock so concurrent first opens do not race, and then hands out reader connections
//! from an r2d2 pool. Every write goes through [`Store::write`], which starts `BEGIN IMMEDIATE`
//! so a writer takes the lock up front and waits in the busy handler instead of failing with
//! `database is locked` when it would upgrade a read.

pub mod adhoc;
pub mod adopt;
pub mod agents;
pub mod check;
pub mod commands;
mod errors;
pub mod events;
pub mod facts;
pub mod forest;
pub mod launches;
pub mod lifecycle;
pub mod list;
pub mod mailbox;
pub mod notices;
pub mod output;
pub mod postgres;
pub mod questions;
pub mod queue;
pub mod refs;
pub mod reports;
pub mod restore;
mod rows;
pub mod sessions;
pub mod snapshots;
pub mod threads;
pub mod top;
mod trim;
pub mod usage;
mod values;
mod wal;
pub mod web;
pub mod workers;

pub use trim::{
    page_cache_bytes, ReaderTrim, IDLE_AFTER, PAGE_CACHE_IDLE_KIB, READ_CACHE_BUSY_KIB,
};
pub use values::ThreadIds;

rows::columns! {
    /// The first column of a list batch's query (`{batch_row}`, which reads the ids' JSON array
    /// as `json_each(?1) AS j`): the id's position in the array. The batch's own row follows it
    /// (`SELECT {batch_row}, {output_row} …`), read from position [`batch_col::COUNT`].
    pub mod batch_col as "{batch_row}" {
        AT = "j.key",
    }
}

rows::columns! {
    /// A migration refinery recorded as applied (`{migration_row}` in
    /// `sql/migrations_applied.sql`, which reads `refinery_schema_history`).
    pub mod migration_col as "{migration_row}" {
        VERSION = "version",
        NAME = "name",
        CHECKSUM = "checksum",
    }
}

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use r2d2_sqlite::SqliteConnectionManager;
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};

use crate::error::{Error, Result};

mod embedded {
    refinery::embed_migrations!("migrations");
    // `MIGRATIONS`, the same files as (version, name, sql): see build.rs.
    include!(concat!(env!("OUT_DIR"), "/migrations.rs"));
}

/// How long a connection waits for a lock held by another connection or process.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// A pooled read connection: a [`Conn`] while it is held.
pub struct ReadConn(r2d2::PooledConnection<SqliteConnectionManager>);

impl std::ops::Deref for ReadConn {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        Conn::of(&self.0)
    }
}

/// A connection as the store's functions take it (a reader from [`Store::read`], or the
/// writer's transaction, which is one too). Outside `store/` it is opaque: it can only be
/// passed on to those functions, so no statement runs anywhere else. The seam where a second
/// backend changes what it holds.
#[repr(transparent)]
pub struct Conn(Connection);

impl Conn {
    /// The database's change counter (`PRAGMA data_version`): it moves whenever another
    /// connection commits.
    pub fn data_version(&self) -> Result<i64> {
        Ok(self.0.query_row("PRAGMA data_version", [], |r| r.get(0))?)
    }

    /// Sets this connection's page cache to `kib` KiB (a bulk load wants more than the
    /// default 2 MiB).
    pub fn set_page_cache_kib(&self, kib: i64) -> Result<()> {
        self.0
            .execute_batch(&format!("PRAGMA cache_size = -{kib}"))?;
        Ok(())
    }

    /// The store's view of a SQLite connection opened by hand (tests, benches).
    pub fn of(c: &Connection) -> &Conn {
        // SAFETY: `Conn` is `repr(transparent)` over `Connection`: same layout, and the
        // reference keeps `c`'s lifetime.
        unsafe { &*(c as *const Connection).cast::<Conn>() }
    }

    /// The SQLite connection, for the store's own functions.
    pub(in crate::store) fn db(&self) -> &Connection {
        &self.0
    }

    /// Runs `sql`, a list batch's query over the thread ids `ids` (one row at
    /// most per id, its first column the id's position in the array: [`batch_col`]), and puts
    /// what `read` makes of each row in that place of `slots`; the others keep what they hold.
    pub(in crate::store) fn by_position<T>(
        &self,
        sql: &str,
        ids: &ThreadIds,
        slots: &mut [T],
        read: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<()> {
        let mut stmt = self.0.prepare_cached(sql)?;
        let mut found = stmt.query([ids])?;
        while let Some(r) = found.next()? {
            let at = r.get::<_, i64>(batch_col::AT)? as usize;
            if let Some(slot) = slots.get_mut(at) {
                *slot = read(r)?;
            }
        }
        Ok(())
    }

    /// The SQLite connection, for tests and benches that set rows up by hand. No code of
    /// `src/` outside `store/` calls it, unit tests aside (`tests/it/layers.rs` checks).
    #[doc(hidden)]
    pub fn sqlite(&self) -> &Connection {
        &self.0
    }
}

/// The transaction [`Store::write`] hands its closure; passed on to the store's functions
/// (it is a [`Conn`] too, for their reads). Opaque outside `store/`, as [`Conn`] is.
#[repr(transparent)]
pub struct Tx<'c>(Transaction<'c>);

impl<'c> Tx<'c> {
    fn of<'a>(t: &'a Transaction<'c>) -> &'a Tx<'c> {
        // SAFETY: `Tx` is `repr(transparent)` over `Transaction`: same layout, same lifetimes.
        unsafe { &*(t as *const Transaction<'c>).cast::<Tx<'c>>() }
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        Conn::of(&self.0)
    }
}

/// A read-only connection of its own that tells when another connection (of this process or
/// another) committed: the row watcher's (`serve/watcher.rs`). Its reads see the latest commit.
pub struct ChangeWatch {
    conn: Conn,
}

impl ChangeWatch {
    /// The database's change counter (`PRAGMA data_version`): it moves whenever another
    /// connection commits.
    pub fn version(&self) -> Result<i64> {
        Ok(self
            .conn
            .db()
            .query_row("PRAGMA data_version", [], |r| r.get(0))?)
    }

    /// The connection, for the store's reads of what changed.
    pub fn conn(&self) -> &Conn {
        &self.conn
    }
}

impl Store {
    /// A [`ChangeWatch`] on this database (a read-only connection apart from the pool).
    pub fn change_watch(&self) -> Result<ChangeWatch> {
        let conn = Connection::open_with_flags(
            &self.path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        Ok(ChangeWatch { conn: Conn(conn) })
    }
}

/// The rows of `sql` (no parameters), each as its cells' text joined with `|` (a blob as its
/// bytes, other values as their debug form): for tests that compare whole tables.
pub fn rows_as_text(conn: &Conn, sql: &str) -> Result<Vec<String>> {
    use rusqlite::types::ValueRef;
    let mut stmt = conn.db().prepare(sql)?;
    let n = stmt.column_count();
    let mut q = stmt.query([])?;
    let mut rows = Vec::new();
    while let Some(r) = q.next()? {
        let cells: Vec<String> = (0..n)
            .map(|i| match r.get_ref(i) {
                Ok(ValueRef::Text(t) | ValueRef::Blob(t)) => {
                    String::from_utf8_lossy(t).into_owned()
                }
                Ok(other) => format!("{other:?}"),
                Err(e) => format!("<{e}>"),
            })
            .collect();
        rows.push(cells.join("|"));
    }
    Ok(rows)
}

/// An open database: the writer connection and the reader pool.
pub struct Store {
    path: PathBuf,
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

impl Store {
    /// Opens (creating it and its parent folders if needed) the database at `path` and
    /// brings its schema up to date.
    ///
    /// Another program's SQLite database is refused untouched, never migrated.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        Self::open_at(path.clone(), true).map_err(|e| name_database(&path, e))
    }

    /// Opens an existing threadbase database for a command that changes what is in it
    /// (`restore`, `stop`): a missing or empty file is refused, not made into a new database.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        if !path.exists() {
            return Err(no_database(&path));
        }
        Self::open_at(path.clone(), false).map_err(|e| name_database(&path, e))
    }

    fn open_at(path: PathBuf, create: bool) -> Result<Store> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| {
                Error::io(format!(
                    "Cannot create the database folder {}: {e}. Repair: create it by hand or pass --db with a writable location.",
                    parent.display()
                ))
            })?;
        }
        let mut writer = Connection::open(&path)
            .map_err(|e| folder_refusal(&path).unwrap_or_else(|| open_error(&path, e)))?;
        // SQLite falls back to a read-only handle when the file cannot be opened for writing;
        // refuse that up front with the reason, instead of failing at the first write.
        if writer.is_readonly(rusqlite::MAIN_DB)? {
            let why = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
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
            crate::error::ErrorCode::Io => folder_refusal(&path).unwrap_or(e),
            _ => e,
        };
        configure(&writer).map_err(|e| refused(e.into()))?;
        match holds(&writer).map_err(|e| refused(open_error(&path, e)))? {
            Holds::Threadbase => {}
            Holds::Nothing if create => {}
            holds => return Err(not_threadbase(&path, &holds)),
        }
        migrate(&mut writer, &path).map_err(refused)?;
        wal::watch(&writer);
        let manager = SqliteConnectionManager::file(&path)
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
        Ok(Store {
            path,
            writer: Mutex::new(Writer {
                conn: writer,
                checkpoints: wal::Checkpoints::default(),
            }),
            readers,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Which checkpoint the last write ran, and the WAL pages it left.
    #[cfg(test)]
    fn checkpoint_state(&self) -> (wal::Ran, i32) {
        let w = self.writer.lock().unwrap();
        (w.checkpoints.last, w.checkpoints.pages)
    }

    /// Moves what the WAL holds into the database file and empties the WAL, so that a database
    /// nobody uses any more is whole in its main file (a copy of the `.sqlite` alone has every
    /// row). It does not wait: while another connection (another serve, a reader) is using the
    /// database, nothing happens and that one settles it later. Called when a writing command
    /// ends (`serve`, `demo`, `http`) and when a store is dropped. True when the WAL is empty.
    pub fn settle_wal(&self) -> bool {
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        wal::truncate_now(&writer.conn)
    }

    /// A read-only connection from the pool.
    pub fn read(&self) -> Result<ReadConn> {
        Ok(ReadConn(self.readers.get()?))
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction on the writer connection; commits when it
    /// returns `Ok`, rolls back otherwise, so a rejected request never half-writes.
    ///
    /// A write can wait: for the writer connection (the ingest thread commits a batch on it),
    /// and in SQLite's busy handler, up to [`BUSY_TIMEOUT`], while another process writes.
    /// Called on a worker of a multi-thread tokio runtime (a request of `serve`), it waits off
    /// that worker: the worker's queue moves to another thread first, so other requests and
    /// children's streams go on meanwhile. Anywhere else it simply runs.
    pub fn write<T>(&self, f: impl FnOnce(&Tx<'_>) -> Result<T>) -> Result<T> {
        let run = || {
            let mut writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
            let Writer { conn, checkpoints } = &mut *writer;
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let out = f(Tx::of(&tx))?;
            tx.commit()?;
            checkpoints.after_commit(conn);
            Ok(out)
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(run)
            }
            _ => run(),
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.settle_wal();
    }
}

/// Hands memory SQLite freed back to the OS: it stays in the allocator's arenas otherwise.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A read transaction on a pooled connection: every statement inside sees one snapshot of the
/// database. Begun and ended with cached statements (a list pays this on every request, and
/// parsing `BEGIN`/`COMMIT` each time cost more than the statements). Ends when dropped.
pub struct ReadTx<'c> {
    conn: &'c Connection,
}

impl<'c> ReadTx<'c> {
    pub fn begin(conn: &'c Conn) -> Result<ReadTx<'c>> {
        let conn = conn.db();
        conn.prepare_cached("BEGIN DEFERRED")?.execute([])?;
        Ok(ReadTx { conn })
    }
}

impl std::ops::Deref for ReadTx<'_> {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        Conn::of(self.conn)
    }
}

impl Drop for ReadTx<'_> {
    fn drop(&mut self) {
        // Nothing was written: ending a read transaction cannot lose anything.
        let ended = self
            .conn
            .prepare_cached("COMMIT")
            .and_then(|mut s| s.execute([]));
        if ended.is_err() && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// Names the database in an I/O error that does not name it yet (a corrupt page found while
/// migrating, a full disk while registering the manager), so the message says which file.
pub fn name_database(path: &Path, e: Error) -> Error {
    if e.code != crate::error::ErrorCode::Io || e.names_database() {
        return e;
    }
    let message = format!("Database {}: {}", path.display(), e.message);
    e.with_message(message).naming_database()
}

fn open_error(path: &Path, e: rusqlite::Error) -> Error {
    let base: Error = e.into();
    let message = format!(
        "Cannot open the database {}: {}",
        path.display(),
        base.message
    );
    base.with_code(crate::error::ErrorCode::Io)
        .with_message(message)
        .naming_database()
}

/// The refusal of a writable database whose folder lets no new file be made (a read-only or
/// immutable folder): SQLite's WAL mode keeps two files beside the database, which it must be
/// able to create. `None` when a file can be made there (the failure was something else).
fn folder_refusal(path: &Path) -> Option<Error> {
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let why = tempfile::tempfile_in(folder).err()?;
    Some(
        Error::io(format!(
            "Cannot use the database {}: its folder {} lets no new file be made ({why}), and SQLite must create the database's -wal and -shm files there (the write-ahead log, which holds the latest writes, and the readers' shared memory). Repair: make the folder writable (`chattr -i` if it is immutable, a read-write mount if it is mounted read-only), or move the database into a writable folder and pass --db with its new path.",
            path.display(),
            folder.display()
        ))
        .naming_database(),
    )
}

/// A read-only open that fails because the folder is not writable: reading a WAL database
/// needs its `-shm` file, which SQLite creates beside the database.
fn read_open_error(path: &Path, e: rusqlite::Error) -> Error {
    let cant_open = matches!(&e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::CannotOpen);
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if cant_open {
        if let Err(why) = rustix::fs::access(folder, rustix::fs::Access::WRITE_OK) {
            return Error::io(format!(
                "Cannot read the database {}: its folder {} is not writable ({why}), and SQLite must create the -shm file there to read a WAL database. Repair: copy the database (and its -wal file, if any) to a writable folder and pass --db with the copy, or make the folder writable.",
                path.display(),
                folder.display()
            ))
            .naming_database();
        }
    }
    open_error(path, e)
}

/// Switches to WAL and runs pending migrations. A file lock beside the database serialises
/// processes that open a new file at the same moment; refinery refuses an applied migration
/// whose text changed.
fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    if up_to_date(conn) {
        return Ok(());
    }
    let lock_path = {
        let mut p = path.as_os_str().to_owned();
        p.push(".migrate-lock");
        PathBuf::from(p)
    };
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).map_err(|e| {
        // The lock file's name starts with the database's.
        Error::io(format!(
            "Cannot lock {}: {e}. Repair: check folder permissions.",
            lock_path.display()
        ))
        .naming_database()
    })?;
    // The switch to WAL is under the lock too: on a new file it rewrites the header, and a
    // second process doing the same at that moment got `database is locked` without waiting.
    let result = (|| {
        // Checked again under the lock: another process may have just migrated it.
        if up_to_date(conn) {
            return Ok(());
        }
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::io(format!(
                "The database {} could not switch to WAL mode (journal_mode is {mode}). Repair: put the database on a local filesystem that supports shared memory.",
                path.display()
            ))
            .naming_database());
        }
        embedded::migrations::runner()
            .set_abort_divergent(true)
            .set_abort_missing(true)
            .run(conn)?;
        Ok(())
    })();
    drop(lock);
    result
}

/// Whether the database at `conn` is in WAL mode and has exactly this build's migrations
/// applied, each with the checksum refinery recorded for it: then there is nothing for
/// refinery's runner to do. The check exists for serve's start (the `extension/first_call` row
/// of `benches/serve.rs`): building the runner compiles refinery's migration-name regex,
/// about 2 ms of a start that the Pi extension's first tool call waits for. Anything else (a
/// new file, an older or newer history, a checksum that differs) goes to the runner, which
/// migrates or refuses as before.
fn up_to_date(conn: &Connection) -> bool {
    let wal = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
        .is_ok_and(|mode| mode.eq_ignore_ascii_case("wal"));
    if !wal {
        return false;
    }
    let applied = conn
        .prepare(rows::row_sql!("migrations_applied", migration_col))
        .and_then(|mut stmt| {
            stmt.query_map([], |r| {
                Ok((
                    r.get::<_, i64>(migration_col::VERSION)?,
                    r.get::<_, String>(migration_col::NAME)?,
                    r.get::<_, String>(migration_col::CHECKSUM)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        });
    let Ok(applied) = applied else {
        return false;
    };
    applied.len() == embedded::MIGRATIONS.len()
        && applied.iter().zip(embedded::MIGRATIONS).all(
            |((version, name, checksum), &(v, n, sql))| {
                *version == i64::from(v)
                    && name == n
                    && *checksum == migration_checksum(v, n, sql).to_string()
            },
        )
}

/// The checksum refinery records for a migration (`refinery_core::Migration::unapplied`):
/// SipHash-1-3 of its name, version and text, in that order.
fn migration_checksum(version: i32, name: &str, sql: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = siphasher::sip::SipHasher13::new();
    name.hash(&mut h);
    version.hash(&mut h);
    sql.hash(&mut h);
    h.finish()
}

/// Opens `path` for ad-hoc reading only: the file is opened read-only and the connection is
/// `query_only`, so no statement can change it.
pub fn open_read_only(path: impl AsRef<Path>) -> Result<Conn> {
    let path = path.as_ref();
    if !path.exists() {
        return Err(no_database(path));
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| read_open_error(path, e))?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.execute_batch("PRAGMA query_only = ON;")
        .map_err(|e| read_open_error(path, e))?;
    // SQLite reads the header and the schema lazily; read them now so a file that is not a
    // database (or whose first page is damaged) fails here, naming the file, and not inside
    // whatever query runs first; and so an empty file or another program's database is named
    // as such, not found wanting a table later.
    let holds = holds(&conn).map_err(|e| read_open_error(path, e))?;
    if holds != Holds::Threadbase {
        return Err(not_threadbase(path, &holds));
    }
    Ok(Conn(conn))
}

/// What a SQLite database holds, as far as threadbase is concerned.
#[derive(Debug, PartialEq, Eq)]
enum Holds {
    /// No table at all: a new or empty file.
    Nothing,
    /// threadbase's tables (the history of its migrations, or its `threads` table).
    Threadbase,
    /// Tables, none of them threadbase's: another program's database (their names).
    Other(Vec<String>),
}

fn holds(conn: &Connection) -> rusqlite::Result<Holds> {
    let mut stmt = conn.prepare(include_str!("../../sql/schema_tables.sql"))?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(if names.is_empty() {
        Holds::Nothing
    } else if names
        .iter()
        .any(|n| n == "threads" || n == "refinery_schema_history")
    {
        Holds::Threadbase
    } else {
        Holds::Other(names)
    })
}

/// The refusal of a file that holds no threadbase database (`holds` is not `Threadbase`).
fn not_threadbase(path: &Path, holds: &Holds) -> Error {
    let message = match holds {
        Holds::Other(names) => {
            let shown: Vec<&str> = names.iter().take(5).map(String::as_str).collect();
            let more = if names.len() > shown.len() { ", …" } else { "" };
            format!(
                "{} is a SQLite database but not a threadbase database (its tables: {}{more}); nothing in it was read or changed. Repair: pass --db or set THREADBASE_DB to a threadbase database file, or a new path for serve to create one.",
                path.display(),
                shown.join(", ")
            )
        }
        _ => format!(
            "{} is an empty database: threadbase never wrote to it, so it holds no threads; nothing in it was changed. Repair: pass --db or set THREADBASE_DB to the threadbase database you mean. {}",
            path.display(),
            HOW_ONE_IS_MADE
        ),
    };
    Error::io(message).naming_database()
}

/// How a threadbase database comes to exist, for the errors about a missing or empty one.
const HOW_ONE_IS_MADE: &str = "`threadbase serve` creates one (the Pi extension starts it at a session's first `thread` tool call, at $THREADBASE_DB or $PI_CODING_AGENT_DIR/threadbase.sqlite), and `threadbase demo --keep FILE` writes one with example rows to FILE.";

/// The refusal of a command that reads or changes an existing database when there is no file.
pub fn no_database(path: &Path) -> Error {
    Error::io(format!(
        "No database at {}. Repair: pass --db or set THREADBASE_DB to the threadbase database you mean. {HOW_ONE_IS_MADE}",
        path.display()
    ))
    .naming_database()
}

#[cfg(test)]
mod tests {

    /// The up-to-date check computes refinery's own checksums for this build's migrations, and
    /// lists them as refinery embeds them.
    #[test]
    fn the_up_to_date_check_knows_refinerys_migrations() {
        use super::*;
        let runner = embedded::migrations::runner();
        // Embedded in file-name order (V10 before V2); refinery sorts them by version to run.
        let mut theirs: Vec<(i64, String, u64)> = runner
            .get_migrations()
            .iter()
            .map(|m| (i64::from(m.version()), m.name().to_string(), m.checksum()))
            .collect();
        theirs.sort();
        let ours: Vec<(i64, String, u64)> = embedded::MIGRATIONS
            .iter()
            .map(|&(v, n, sql)| (i64::from(v), n.to_string(), migration_checksum(v, n, sql)))
            .collect();
        assert_eq!(ours, theirs);
        // A migrated file is up to date; one whose history differs in any way is not.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sqlite");
        drop(Store::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        assert!(up_to_date(&conn));
        for change in [
            "UPDATE refinery_schema_history SET checksum = '1' WHERE version = 1",
            "UPDATE refinery_schema_history SET name = 'x' WHERE version = 2",
            "DELETE FROM refinery_schema_history WHERE version = (SELECT max(version) FROM refinery_schema_history)",
        ] {
            conn.execute_batch(&format!("BEGIN; {change}")).unwrap();
            assert!(!up_to_date(&conn), "{change}");
            conn.execute_batch("ROLLBACK").unwrap();
        }
        assert!(!up_to_date(&Connection::open_in_memory().unwrap()));
    }

    /// An I/O error is named once: prefixed when its message does not name the database, left
    /// alone when it was built naming it (the open errors), and a non-I/O error is left alone.
    #[test]
    fn an_io_error_names_the_database_once() {
        use crate::error::{Error, ErrorCode};
        let path = std::path::Path::new("/tmp/x/threadbase.sqlite");
        let named = super::name_database(path, Error::io("disk full. Repair: free space."));
        assert_eq!(
            named.message,
            "Database /tmp/x/threadbase.sqlite: disk full. Repair: free space."
        );
        assert_eq!(super::name_database(path, named.clone()), named);
        let cant_open = super::open_error(
            path,
            rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
                None,
            ),
        );
        assert_eq!(cant_open.code, ErrorCode::Io);
        assert!(
            cant_open
                .message
                .starts_with("Cannot open the database /tmp/x/threadbase.sqlite: "),
            "{}",
            cant_open.message
        );
        assert_eq!(super::name_database(path, cant_open.clone()), cant_open);
        assert!(
            std::error::Error::source(&cant_open).is_some(),
            "keeps its cause"
        );
        let invalid = Error::invalid("bad");
        assert_eq!(super::name_database(path, invalid.clone()), invalid);
    }

    /// Contract A's list queries return the thread's id, path and status, then its kept
    /// answer, at the positions `store::list` reads (the rest of a row is read by
    /// threads_by_ids).
    #[test]
    fn list_queries_return_the_listed_columns() {
        use crate::store::list::listed_col::{self, ID, KEPT_JSON, KEPT_LINE, PATH, STATUS};
        let dir = tempfile::tempdir().unwrap();
        let store = super::Store::open(dir.path().join("t.sqlite")).unwrap();
        let conn = store.read().unwrap();
        let queries = [
            include_str!("../../sql/list_all.sql"),
            include_str!("../../sql/list_children.sql"),
            include_str!("../../sql/list_descendants.sql"),
            include_str!("../../sql/list_all_live.sql"),
            include_str!("../../sql/list_all_archived.sql"),
            include_str!("../../sql/list_children_live.sql"),
            include_str!("../../sql/list_children_archived.sql"),
            include_str!("../../sql/list_descendants_live.sql"),
            include_str!("../../sql/list_descendants_archived.sql"),
            include_str!("../../sql/list_children_reach.sql"),
            include_str!("../../sql/list_descendants_reach.sql"),
        ];
        for sql in queries {
            let stmt = conn.db().prepare(&listed_col::expand(sql)).unwrap();
            assert_eq!(
                stmt.column_names(),
                ["id", "path", "status", "json", "line"],
                "{sql}"
            );
        }
        assert_eq!([ID, PATH, STATUS, KEPT_JSON, KEPT_LINE], [0, 1, 2, 3, 4]);
    }
}
