//! The store: every table's rows, one function per query of `sql/`, over one of two backends
//! chosen when the database is opened: a SQLite file ([`sqlite`]) or a PostgreSQL server
//! ([`postgres`]), each with its connections, its opening, its migrations runner and its
//! chores. [`Store`] holds the one it opened and hands out [`Conn`]s ([`Store::read`],
//! [`Store::write`]), through which every query runs ([`db`]) whichever backend holds the rows.

pub mod adhoc;
pub mod adopt;
pub mod agents;
pub mod attention;
pub mod budgets;
pub mod check;
pub mod commands;
pub mod counted;
pub mod db;
pub mod events;
pub mod facts;
pub mod forest;
pub mod hosts;
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
pub mod sqlite;
pub mod status;
pub mod threads;
pub mod top;
pub mod usage;
mod values;
pub mod web;
pub mod workers;
pub mod worktrees;

pub use rows::ROWS;
pub use sqlite::open::{name_database, no_database};
pub use sqlite::trim::{
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

pub use sqlite::BUSY_TIMEOUT;

use crate::error::{Cause, Error, Result};

/// A pooled read connection: a [`Conn`] while it is held.
pub struct ReadConn(Pooled);

enum Pooled {
    Sqlite(sqlite::Reader),
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
        counted::add(u64::from(self.sqlite().is_none()), 0);
        self.0.advisory_lock(lock.keys())
    }

    /// The database's change counter (`PRAGMA data_version`): it moves whenever another
    /// connection commits.
    pub fn data_version(&self) -> Result<i64> {
        self.0.change_count()
    }

    /// [`Conn::data_version`] without PostgreSQL's announcements of children's facts alone;
    /// `None` on SQLite, which does not tell commits apart.
    pub fn rows_data_version(&self) -> Result<Option<i64>> {
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
    pub fn of(c: &sqlite::Connection) -> &Conn {
        Conn::of_db(c)
    }

    fn of_db<'a>(c: &'a (dyn db::Db + 'static)) -> &'a Conn {
        // SAFETY: `Conn` is `repr(transparent)` over `dyn Db`: same layout and the same
        // pointer metadata, and the reference keeps `c`'s lifetime.
        unsafe { &*(c as *const dyn db::Db as *const Conn) }
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

    /// The SQLite connection (`None` on PostgreSQL): for the store's SQLite-only chores, and
    /// for tests and benches that set rows up by hand. No code of `src/` outside `store/` calls
    /// it, unit tests aside (`tests/it/layers.rs` checks).
    #[doc(hidden)]
    pub fn sqlite(&self) -> Option<&sqlite::Connection> {
        self.0.sqlite()
    }
}

/// A connection of its own, apart from the pool (a read-only open, the row watcher's): a
/// [`Conn`] while it lives.
pub struct OpenConn(Box<dyn db::Db + Send>);

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
    /// PostgreSQL's: where a lost connection is reopened (and shared, for the kept answers).
    reopen: Option<std::sync::Arc<postgres::store::Watches>>,
    /// Added to the connection's count: its opening's (`Watches::open`).
    offset: i64,
}

impl ChangeWatch {
    /// The change counter: it moves whenever another connection commits.
    pub fn version(&mut self) -> Result<i64> {
        match self.conn.data_version() {
            Ok(v) => Ok(v + self.offset),
            Err(e) => {
                let Some(watches) = &self.reopen else {
                    return Err(e);
                };
                let (conn, offset) = watches.open()?;
                self.conn = OpenConn(Box::new(conn));
                self.offset = offset;
                Ok(self.conn.data_version()? + self.offset)
            }
        }
    }

    /// [`ChangeWatch::version`] moved by what may have changed a command, notice, question or
    /// thread state: on PostgreSQL all but the announcements of children's facts alone;
    /// `None` on SQLite, where every commit may have. Read after [`ChangeWatch::version`].
    pub fn rows_version(&self) -> Result<Option<i64>> {
        Ok(self.conn.rows_data_version()?.map(|v| v + self.offset))
    }

    /// The connection, for the store's reads of what changed.
    pub fn conn(&self) -> &Conn {
        &self.conn
    }
}

impl Store {
    /// A [`ChangeWatch`] on this database (a read-only connection apart from the pool).
    pub fn change_watch(&self) -> Result<ChangeWatch> {
        let (conn, reopen, offset) = match &self.backend {
            Backend::Sqlite(_) => (OpenConn(Box::new(sqlite::open_watch(&self.path)?)), None, 0),
            Backend::Postgres(pg) => {
                let (conn, offset) = pg.watches().open()?;
                (OpenConn(Box::new(conn)), Some(pg.watches().clone()), offset)
            }
        };
        Ok(ChangeWatch {
            conn,
            reopen,
            offset,
        })
    }
}

/// Whether `e` is a database's refusal of a duplicate key (a unique index or a primary key),
/// on either backend.
pub fn is_unique_violation(e: &Error) -> bool {
    matches!(e.cause(), Some(Cause::Database(c))
        if sqlite::errors::is_unique_violation(&**c) || postgres::is_unique_violation(&**c))
}

/// Whether `e` says the database could not be reached (a PostgreSQL server that is down,
/// restarting or unreachable: the connection failed or closed), as opposed to a statement the
/// database refused. Such a write can be tried again once the server is back.
pub fn is_connection_lost(e: &Error) -> bool {
    match e.cause() {
        // The socket itself failed (connecting, or waiting on it: `store::postgres::direct`).
        Some(Cause::Database(cause)) if cause.downcast_ref::<std::io::Error>().is_some() => true,
        Some(Cause::Database(cause)) => postgres::is_connection_lost(&**cause),
        _ => e.message.starts_with(postgres::store::UNREACHABLE),
    }
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
    Sqlite(sqlite::SqliteStore),
    Postgres(postgres::store::PgStore),
}

/// The database `path` names when it is a PostgreSQL URL (`postgres://…`), else `None` (a
/// SQLite file).
pub fn database_url(path: &Path) -> Option<&str> {
    path.to_str().filter(|p| postgres::conn::is_url(p))
}

/// The database `path` names without a PostgreSQL URL's password, and the password
/// (`postgres::conn::split_password`); a file's path is as it was, with none.
pub fn split_password(path: PathBuf) -> (PathBuf, Option<String>) {
    match database_url(&path) {
        Some(url) => {
            let (shown, password) = postgres::conn::split_password(url);
            (PathBuf::from(shown), password)
        }
        None => (path, None),
    }
}

/// How long one statement of a read-only connection to PostgreSQL may run (`threadbase sql`,
/// `top`, the inspection commands) before the server stops it.
pub const READ_ONLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Opens the database at `path` for ad-hoc reading only: no statement can change it (a SQLite
/// file opened read-only and `query_only`; a PostgreSQL connection whose transactions are
/// read-only and whose statements stop after [`READ_ONLY_TIMEOUT`]).
pub fn open_read_only(path: impl AsRef<Path>) -> Result<OpenConn> {
    let path = path.as_ref();
    match database_url(path) {
        Some(url) => {
            let (conn, _, _) = postgres::store::open_read_only(url, READ_ONLY_TIMEOUT)?;
            Ok(OpenConn(Box::new(conn)))
        }
        None => Ok(OpenConn(Box::new(sqlite::open::open_read_only(path)?))),
    }
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
        Ok(Store {
            other_hosts: std::sync::atomic::AtomicU8::new(0),
            tree: std::sync::OnceLock::new(),
            commits: std::sync::atomic::AtomicU64::new(0),
            backend: Backend::Sqlite(sqlite::SqliteStore::open(&path, create)?),
            path,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Which checkpoint the last write ran, and the WAL pages it left.
    #[cfg(test)]
    fn checkpoint_state(&self) -> (sqlite::wal::Ran, i32) {
        let Backend::Sqlite(s) = &self.backend else {
            panic!("a SQLite store");
        };
        s.checkpoint_state()
    }

    /// Moves what the WAL holds into the database file and empties the WAL, so that a database
    /// nobody uses any more is whole in its main file (a copy of the `.sqlite` alone has every
    /// row). It does not wait: while another connection (another serve, a reader) is using the
    /// database, nothing happens and that one settles it later. Called when a writing command
    /// ends (`serve`, `demo`, `http`) and when a store is dropped. True when the WAL is empty.
    pub fn settle_wal(&self) -> bool {
        match &self.backend {
            Backend::Sqlite(s) => s.settle_wal(),
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
            Backend::Sqlite(s) => Pooled::Sqlite(s.read()?),
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
            Backend::Sqlite(s) => s.write(|conn| f(&Tx(conn))),
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
            Backend::Postgres(pg) => Some(pg.watches().shared()),
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

/// The rows of `sql` (no parameters), each as its cells' text joined with `|` (a blob as its
/// bytes, other values as their debug form): for the unit tests that compare whole tables.
#[cfg(test)]
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

#[cfg(test)]
mod tests;
