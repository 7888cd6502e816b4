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
pub mod attention;
pub mod budgets;
pub mod check;
pub mod commands;
pub mod counted;
pub mod db;
mod errors;
pub use errors::{is_connection_lost, is_unique_violation};
pub mod events;
pub mod facts;
pub mod forest;
pub mod hosts;
pub mod launches;
pub mod lifecycle;
pub mod list;
pub mod mailbox;
pub mod notices;
mod open;
pub mod output;
pub mod postgres;
pub mod questions;
pub mod queue;
pub mod refs;
pub mod reports;
pub mod restore;
mod rows;
pub mod sessions;
pub mod status;
pub mod threads;
pub mod top;
mod trim;
pub mod usage;
mod values;
mod wal;
pub mod web;
pub mod workers;
pub mod worktrees;

use open::{folder_refusal, holds, migrate, not_threadbase, open_error, Holds};
pub use open::{name_database, no_database, open_read_only};
pub use rows::ROWS;
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
use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use crate::error::{Error, Result};

/// How long a connection waits for a lock held by another connection or process.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// A pooled read connection: a [`Conn`] while it is held.
pub struct ReadConn(Pooled);

enum Pooled {
    Sqlite(r2d2::PooledConnection<SqliteConnectionManager>),
    Postgres(r2d2::PooledConnection<postgres::store::Readers>),
}

impl std::ops::Deref for ReadConn {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        match &self.0 {
            Pooled::Sqlite(c) => Conn::of(c),
            Pooled::Postgres(c) => Conn::of_db(&**c),
        }
    }
}

/// A connection as the store's functions take it (a reader from [`Store::read`], or the
/// writer's transaction, which is one too). Outside `store/` it is opaque: it can only be
/// passed on to those functions, so no statement runs anywhere else. It holds a backend
/// ([`db::Db`]): every query runs through [`Conn::each`], [`Conn::one`], [`Conn::opt`],
/// [`Conn::all`] or [`Conn::execute`], whichever database holds the rows.
#[repr(transparent)]
pub struct Conn(dyn db::Db);

impl Conn {
    /// Takes `lock` until the transaction ends (PostgreSQL; nothing on SQLite).
    pub fn lock(&self, lock: Lock<'_>) -> Result<()> {
        counted::add(u64::from(!self.is_sqlite()), 0);
        self.0.advisory_lock(lock.keys())
    }

    /// The database's change counter (`PRAGMA data_version`): it moves whenever another
    /// connection commits.
    pub fn data_version(&self) -> Result<i64> {
        self.0.change_count()
    }

    /// [`Conn::data_version`] without PostgreSQL's announcements of children's facts alone.
    pub fn rows_data_version(&self) -> Result<i64> {
        self.0.rows_change_count()
    }

    /// Announces this write transaction with its commit (PostgreSQL), where it would be
    /// announced later with other facts ([`Store::write_facts`]): it changed a thread's state
    /// or wrote a notice, which other serves' watchers act on.
    pub fn announce_now(&self) {
        self.0.announce_now()
    }

    /// Sets this connection's page cache to `kib` KiB (a bulk load wants more than the
    /// default 2 MiB).
    pub fn set_page_cache_kib(&self, kib: i64) -> Result<()> {
        if let Some(c) = self.0.sqlite() {
            c.execute_batch(&format!("PRAGMA cache_size = -{kib}"))?;
        }
        Ok(())
    }

    /// Whether this connection is SQLite's (whose cursors the list streams through).
    pub(in crate::store) fn is_sqlite(&self) -> bool {
        self.0.sqlite().is_some()
    }

    /// Runs one statement (no parameters) that is not a query of `sql/`: its columns' names and
    /// every row's values, on either backend (`threadbase sql` on PostgreSQL, the tests'
    /// checks).
    pub fn query_values(&self, sql: &str) -> Result<(Vec<String>, Vec<Vec<db::Value<'static>>>)> {
        counted::add(1, 0);
        self.0.query_values(sql)
    }

    /// Runs `sql`, statements that return no rows, on either backend: for tests and benches
    /// that set rows up by hand (inside [`Store::write`] for a write).
    #[doc(hidden)]
    pub fn execute_script(&self, sql: &str) -> Result<()> {
        counted::add(1, 0);
        self.0.batch(sql)
    }

    /// The store's view of a SQLite connection opened by hand (tests, benches).
    pub fn of(c: &Connection) -> &Conn {
        Conn::of_db(c)
    }

    fn of_db<'a>(c: &'a (dyn db::Db + 'static)) -> &'a Conn {
        // SAFETY: `Conn` is `repr(transparent)` over `dyn Db`: same layout and the same
        // pointer metadata, and the reference keeps `c`'s lifetime.
        unsafe { &*(c as *const dyn db::Db as *const Conn) }
    }

    /// The SQLite connection, for the store's SQLite-only work (the WAL, the checks, the
    /// migrations). Panics on another backend: callers are SQLite's own paths.
    pub(in crate::store) fn db(&self) -> &Connection {
        self.0
            .sqlite()
            .expect("a SQLite-only store path ran on another backend")
    }

    /// Runs `q` with `p` and hands each row to `f`, in order.
    pub(in crate::store) fn each(
        &self,
        q: &db::Query,
        p: db::Params<'_>,
        mut f: impl FnMut(&db::Row<'_>) -> Result<()>,
    ) -> Result<()> {
        counted::add(1, 0);
        self.0.each(q, p, &mut |r| f(r).map(|()| true))
    }

    /// The rows of `q` with `p`, each as `f` reads it.
    pub(in crate::store) fn all<T>(
        &self,
        q: &db::Query,
        p: db::Params<'_>,
        mut f: impl FnMut(&db::Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        counted::add(1, 0);
        self.0.each(q, p, &mut |r| {
            out.push(f(r)?);
            Ok(true)
        })?;
        Ok(out)
    }

    /// The first row of `q` with `p` as `f` reads it, if there is one.
    pub(in crate::store) fn opt<T>(
        &self,
        q: &db::Query,
        p: db::Params<'_>,
        f: impl FnOnce(&db::Row<'_>) -> Result<T>,
    ) -> Result<Option<T>> {
        let mut f = Some(f);
        let mut out = None;
        counted::add(1, 0);
        self.0.each(q, p, &mut |r| {
            if let Some(f) = f.take() {
                out = Some(f(r)?);
            }
            Ok(false)
        })?;
        Ok(out)
    }

    /// The first row of `q` with `p` as `f` reads it; an error when there is none
    /// ([`db::no_row`]).
    pub(in crate::store) fn one<T>(
        &self,
        q: &db::Query,
        p: db::Params<'_>,
        f: impl FnOnce(&db::Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.opt(q, p, f)?.ok_or_else(db::no_row)
    }

    /// Runs `q` with `p`; how many rows it changed.
    pub(in crate::store) fn execute(&self, q: &db::Query, p: db::Params<'_>) -> Result<usize> {
        counted::add(1, 0);
        self.0.execute(q, p)
    }

    /// Runs `sql`, a list batch's query over the thread ids `ids` (one row at
    /// most per id, its first column the id's position in the array: [`batch_col`]), and puts
    /// what `read` makes of each row in that place of `slots`; the others keep what they hold.
    pub(in crate::store) fn by_position<T>(
        &self,
        q: &db::Query,
        ids: &ThreadIds,
        slots: &mut [T],
        read: impl Fn(&db::Row<'_>) -> Result<T>,
    ) -> Result<()> {
        self.each(q, db::params![ids], |r| {
            let at: usize = r.get(batch_col::AT)?;
            if let Some(slot) = slots.get_mut(at) {
                *slot = read(r)?;
            }
            Ok(())
        })
    }

    /// The SQLite connection, for tests and benches that set rows up by hand. No code of
    /// `src/` outside `store/` calls it, unit tests aside (`tests/it/layers.rs` checks).
    #[doc(hidden)]
    pub fn sqlite(&self) -> &Connection {
        self.db()
    }
}

/// A connection of its own, apart from the pool (a read-only open, the row watcher's): a
/// [`Conn`] while it lives.
pub struct OpenConn(Box<dyn db::Db + Send>);

impl OpenConn {
    pub(in crate::store) fn sqlite(c: Connection) -> OpenConn {
        OpenConn(Box::new(c))
    }

    pub(in crate::store) fn postgres(c: postgres::conn::PgConn) -> OpenConn {
        OpenConn(Box::new(c))
    }
}

impl std::ops::Deref for OpenConn {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        Conn::of_db(&*self.0)
    }
}

/// The transaction [`Store::write`] hands its closure; passed on to the store's functions
/// (it is a [`Conn`] too, for their reads). Opaque outside `store/`, as [`Conn`] is.
pub struct Tx<'c>(&'c Conn);

impl std::ops::Deref for Tx<'_> {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        self.0
    }
}

/// A read-only connection of its own that tells when another connection (of this process or
/// another) committed: the row watcher's (`serve/watcher.rs`) and the page's. Its reads see the
/// latest commit. On PostgreSQL it listens for the writes' notifications, and a lost connection
/// is reopened by the next [`ChangeWatch::version`], whose counter then jumps (notifications
/// were lost meanwhile, so whoever watches rescans).
pub struct ChangeWatch {
    conn: OpenConn,
    reopen: Option<postgres::conn::Url>,
    offset: i64,
}

impl ChangeWatch {
    /// The change counter: it moves whenever another connection commits.
    pub fn version(&mut self) -> Result<i64> {
        match self.conn.data_version() {
            Ok(v) => Ok(v + self.offset),
            Err(e) => {
                let Some(url) = &self.reopen else {
                    return Err(e);
                };
                let (conn, _) = postgres::store::watch(url)?;
                self.conn = OpenConn::postgres(conn);
                self.offset += 1 << 40;
                Ok(self.conn.data_version()? + self.offset)
            }
        }
    }

    /// [`ChangeWatch::version`] moved by what may have changed a command, notice, question or
    /// thread state: every commit on SQLite; on PostgreSQL all but the announcements of
    /// children's facts alone. Read after [`ChangeWatch::version`].
    pub fn rows_version(&self) -> Result<i64> {
        Ok(self.conn.rows_data_version()? + self.offset)
    }

    /// The connection, for the store's reads of what changed.
    pub fn conn(&self) -> &Conn {
        &self.conn
    }
}

impl Store {
    /// A [`ChangeWatch`] on this database (a read-only connection apart from the pool).
    pub fn change_watch(&self) -> Result<ChangeWatch> {
        let (conn, reopen) = match &self.backend {
            Backend::Sqlite { .. } => {
                let conn = Connection::open_with_flags(
                    &self.path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                )?;
                conn.busy_timeout(BUSY_TIMEOUT)?;
                (OpenConn::sqlite(conn), None)
            }
            Backend::Postgres(pg) => {
                let (conn, _) = pg.change_watch()?;
                (OpenConn::postgres(conn), Some(pg.url().clone()))
            }
        };
        Ok(ChangeWatch {
            conn,
            reopen,
            offset: 0,
        })
    }
}

/// The rows of `sql` (no parameters), each as its cells' text joined with `|` (a blob as its
/// bytes, other values as their debug form): for tests that compare whole tables.
pub fn rows_as_text(conn: &Conn, sql: &str) -> Result<Vec<String>> {
    use db::Value;
    let (_, rows) = conn.query_values(sql)?;
    Ok(rows
        .into_iter()
        .map(|row| {
            row.into_iter()
                .map(|v| match v {
                    Value::Text(t) => t.into_owned(),
                    Value::Blob(b) => String::from_utf8_lossy(&b).into_owned(),
                    Value::Int(i) => format!("Integer({i})"),
                    Value::Real(r) => format!("Real({r:?})"),
                    Value::Null => "Null".to_owned(),
                })
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect())
}

use postgres::store::Announce;

/// What a write serializes with on PostgreSQL, beyond row locks and UNIQUE constraints (see
/// `postgres::store`). On SQLite every write holds the whole file, and these are no-ops.
#[derive(Clone, Copy, Debug)]
pub enum Lock<'a> {
    /// Every rule that checks before it inserts lives inside one tree (a path per manager, live
    /// limits and the queue per session, a tree's budget and thread cap, spawn keys per
    /// coordinator): a serve's writes take its tree's lock, keyed by the root session.
    Tree(&'a str),
    /// The team budget's check, only when a team budget is set.
    TeamBudget,
    /// A serve's start, judging whether its host id collides with another machine's serve.
    HostId(&'a str),
}

impl Lock<'_> {
    /// The advisory lock's two keys: a class and a stable 32-bit hash of the name (FNV-1a,
    /// the same on every host and version).
    fn keys(self) -> (i32, i32) {
        let (class, name) = match self {
            Lock::Tree(root) => (0x7462_7472, root),   // "tbtr"
            Lock::TeamBudget => (0x7462_7462, ""),     // "tbtb"
            Lock::HostId(host) => (0x7462_6869, host), // "tbhi"
        };
        let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        (class, hash as i32)
    }
}

/// An open database: the writer connection and the reader pool, of a SQLite file or a
/// PostgreSQL server.
pub struct Store {
    /// The file, or the server's URL as shown (no password).
    path: PathBuf,
    backend: Backend,
    /// Whether another host's serves have heartbeat rows, as this serve's last heartbeat found
    /// ([`Store::note_other_hosts`]): 0 not known yet, 1 none, 2 some.
    other_hosts: std::sync::atomic::AtomicU8,
    /// The tree whose lock this store's writes take ([`Store::serialize_tree`]; a serve's).
    tree: std::sync::OnceLock<String>,
    /// Transactions [`Store::write`] committed (engine/cache.rs: the answers a serve keeps are
    /// dropped after its own commits at once, before their change notification arrives).
    commits: std::sync::atomic::AtomicU64,
}

// One value per open database, so the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum Backend {
    Sqlite {
        writer: Mutex<Writer>,
        readers: r2d2::Pool<SqliteConnectionManager>,
    },
    Postgres(postgres::store::PgStore),
}

/// The database `path` names when it is a PostgreSQL URL (`postgres://…`), else `None` (a
/// SQLite file).
pub fn database_url(path: &Path) -> Option<&str> {
    path.to_str().filter(|p| postgres::conn::is_url(p))
}

/// Refuses a database named by a URL of a scheme other than PostgreSQL's (`mysql://…`,
/// `sqlite://…`, …): without this it would be taken for a relative file path (a folder named
/// `mysql:`) and a SQLite file created there.
pub fn refuse_unsupported_url(path: &Path) -> Result<()> {
    let Some(text) = path.to_str() else {
        return Ok(());
    };
    let Some((scheme, _)) = text.split_once("://") else {
        return Ok(());
    };
    let is_scheme = scheme
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !is_scheme || postgres::conn::is_url(text) {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "The database {scheme}://… is a URL of an unsupported database ({scheme}); threadbase keeps its rows in a SQLite file or a PostgreSQL database. Repair: set --db (or THREADBASE_DB) to a SQLite file path or a postgres://USER@HOST[:PORT]/DATABASE URL."
    )))
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
        if let Some(url) = database_url(path.as_ref()) {
            return Self::open_postgres(url, true);
        }
        let path = path.as_ref().to_path_buf();
        Self::open_at(path.clone(), true).map_err(|e| name_database(&path, e))
    }

    /// Opens an existing threadbase database for a command that changes what is in it
    /// (`restore`, `stop`): a missing or empty file is refused, not made into a new database.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Store> {
        if let Some(url) = database_url(path.as_ref()) {
            return Self::open_postgres(url, false);
        }
        let path = path.as_ref().to_path_buf();
        if !path.exists() {
            return Err(no_database(&path));
        }
        Self::open_at(path.clone(), false).map_err(|e| name_database(&path, e))
    }

    fn open_postgres(url: &str, create: bool) -> Result<Store> {
        let pg = postgres::store::PgStore::open(url, create)?;
        Ok(Store {
            other_hosts: std::sync::atomic::AtomicU8::new(0),
            tree: std::sync::OnceLock::new(),
            commits: std::sync::atomic::AtomicU64::new(0),
            path: PathBuf::from(pg.url().shown()),
            backend: Backend::Postgres(pg),
        })
    }

    /// Whether the rows live on a PostgreSQL server.
    pub fn is_postgres(&self) -> bool {
        matches!(self.backend, Backend::Postgres(_))
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
            other_hosts: std::sync::atomic::AtomicU8::new(0),
            tree: std::sync::OnceLock::new(),
            commits: std::sync::atomic::AtomicU64::new(0),
            path,
            backend: Backend::Sqlite {
                writer: Mutex::new(Writer {
                    conn: writer,
                    checkpoints: wal::Checkpoints::default(),
                }),
                readers,
            },
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Which checkpoint the last write ran, and the WAL pages it left.
    #[cfg(test)]
    fn checkpoint_state(&self) -> (wal::Ran, i32) {
        let Backend::Sqlite { writer, .. } = &self.backend else {
            panic!("a SQLite store");
        };
        let w = writer.lock().unwrap();
        (w.checkpoints.last, w.checkpoints.pages)
    }

    /// Moves what the WAL holds into the database file and empties the WAL, so that a database
    /// nobody uses any more is whole in its main file (a copy of the `.sqlite` alone has every
    /// row). It does not wait: while another connection (another serve, a reader) is using the
    /// database, nothing happens and that one settles it later. Called when a writing command
    /// ends (`serve`, `demo`, `http`) and when a store is dropped. True when the WAL is empty.
    pub fn settle_wal(&self) -> bool {
        match &self.backend {
            Backend::Sqlite { writer, .. } => {
                let writer = writer.lock().unwrap_or_else(|p| p.into_inner());
                wal::truncate_now(&writer.conn)
            }
            Backend::Postgres(_) => true,
        }
    }

    /// Records what this serve's heartbeat found (`hosts::heartbeat`): whether another host's
    /// serves have heartbeat rows.
    pub fn note_other_hosts(&self, some: bool) {
        self.other_hosts.store(
            if some { 2 } else { 1 },
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// Whether a serve's answers must look for live threads of unreachable hosts
    /// (`hosts::unreachable_of`): unless its last heartbeat found no other host's serve rows.
    /// A host is unreachable only 30 s after its last heartbeat row, and this serve beats
    /// every 5 s, so a host that could be unreachable was seen. It exists for speed: on one
    /// host, a list of live threads (`serve_pg/list_live_8` of `benches/serve.rs`) and a poll
    /// of a live one skip that query, one round trip to a PostgreSQL server.
    pub fn hosts_to_check(&self) -> bool {
        self.other_hosts.load(std::sync::atomic::Ordering::Relaxed) != 1
    }

    /// A read-only connection from the pool.
    pub fn read(&self) -> Result<ReadConn> {
        Ok(ReadConn(match &self.backend {
            Backend::Sqlite { readers, .. } => Pooled::Sqlite(readers.get()?),
            Backend::Postgres(pg) => Pooled::Postgres(pg.read()?),
        }))
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction on the writer connection; commits when it
    /// returns `Ok`, rolls back otherwise, so a rejected request never half-writes.
    ///
    /// A write can wait: for the writer connection (the ingest thread commits a batch on it),
    /// and in SQLite's busy handler, up to [`BUSY_TIMEOUT`], while another process writes.
    /// Called on a worker of a multi-thread tokio runtime (a request of `serve`), it waits off
    /// that worker: the worker's queue moves to another thread first, so other requests and
    /// children's streams go on meanwhile. Anywhere else it simply runs.
    ///
    /// On PostgreSQL it first takes the tree's lock when this store serializes a tree
    /// ([`Store::serialize_tree`]), and it can run `f` again whole after a lost deadlock.
    pub fn write<T>(&self, f: impl FnMut(&Tx<'_>) -> Result<T>) -> Result<T> {
        self.write_locked(self.tree.get().map(|t| Lock::Tree(t)), Announce::Now, f)
    }

    /// [`Store::write`] for facts a child reported (event batches, output, usage) and for
    /// heartbeats: no rule checks them, so on PostgreSQL they take no lock and never wait for
    /// another serve's rule, and other processes' change watches hear of them together, within
    /// `postgres::store::ANNOUNCE_AFTER` (this process's reads see them at once).
    pub fn write_facts<T>(&self, f: impl FnMut(&Tx<'_>) -> Result<T>) -> Result<T> {
        self.write_locked(None, Announce::Later, f)
    }

    /// From now on, this store's [`Store::write`]s take the lock of the tree whose root session
    /// is `root` (a serve calls it once, at its start).
    pub fn serialize_tree(&self, root: &str) {
        let _ = self.tree.set(root.to_owned());
    }

    fn write_locked<T>(
        &self,
        lock: Option<Lock<'_>>,
        announce: Announce,
        mut f: impl FnMut(&Tx<'_>) -> Result<T>,
    ) -> Result<T> {
        // Its `BEGIN` and `COMMIT` (the statements inside count themselves).
        counted::add(2, 1);
        let mut run = || match &self.backend {
            Backend::Sqlite { writer, .. } => {
                let mut writer = writer.lock().unwrap_or_else(|p| p.into_inner());
                let Writer { conn, checkpoints } = &mut *writer;
                let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
                let out = f(&Tx(Conn::of(&tx)))?;
                tx.commit()?;
                checkpoints.after_commit(conn);
                Ok(out)
            }
            Backend::Postgres(pg) => pg.write(lock.map(Lock::keys), announce, |conn| f(&Tx(conn))),
        };
        let out = match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(run)
            }
            _ => run(),
        };
        // Counted once it committed (a transaction that changed nothing too: harmless).
        if out.is_ok() {
            self.commits
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        out
    }

    /// On PostgreSQL, the count of changes a change watch of this store already listens to
    /// (`None` on SQLite, or when no watch is open): a second reader of the count needs no
    /// connection of its own (`engine/cache.rs`; a serve at rest holds at most 3, issue 46).
    pub fn shared_changes(&self) -> Option<Option<i64>> {
        match &self.backend {
            Backend::Postgres(pg) => Some(pg.shared_changes()),
            _ => None,
        }
    }

    /// How many transactions [`Store::write`] committed in this process.
    pub fn commits(&self) -> u64 {
        self.commits.load(std::sync::atomic::Ordering::SeqCst)
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
    conn: &'c Conn,
}

impl<'c> ReadTx<'c> {
    pub fn begin(conn: &'c Conn) -> Result<ReadTx<'c>> {
        // Its `BEGIN` and `COMMIT`.
        counted::add(2, 0);
        conn.0.begin_read()?;
        Ok(ReadTx { conn })
    }
}

impl std::ops::Deref for ReadTx<'_> {
    type Target = Conn;

    fn deref(&self) -> &Conn {
        self.conn
    }
}

impl Drop for ReadTx<'_> {
    fn drop(&mut self) {
        self.conn.0.end_read();
    }
}

#[cfg(test)]
mod tests;
