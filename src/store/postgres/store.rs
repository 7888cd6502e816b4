//! A PostgreSQL database as the store: a writer connection, a pool of readers, and the
//! guarantees SQLite's one file gives for free.
//!
//! - **Writers serialize only where a rule needs it.** On SQLite every write is one
//!   `BEGIN IMMEDIATE` transaction, so check-then-insert rules (a path reserved once per
//!   manager, live limits and the queue per session, budgets per tree and per team, spawn keys
//!   per coordinator) cannot race. Here a serve's write takes one transaction-level advisory
//!   lock scoped to its tree ([`super::super::Lock::Tree`], keyed by the root session), since
//!   every one of those rules lives inside one tree; the team budget's check adds the team's
//!   lock only when a team budget is set, and a serve's start takes its host id's. Writes of
//!   what children report (event batches, output, usage) and heartbeats take none, and a
//!   command line's writes (stop, forget, answer, …) rely on row locks and the UNIQUE
//!   constraints, which stay the backstop everywhere. Writes of different trees never wait
//!   for each other; readers never wait at all. A write that loses a deadlock or a
//!   serialization check is run again whole ([`RETRIES`]).
//! - **A change counter.** Each write that changed a row notifies [`CHANGES`] with its commit
//!   (PostgreSQL delivers it at commit, and drops it at rollback); a change watch LISTENs on a connection
//!   of its own and counts, where SQLite's reads `PRAGMA data_version`. A transaction that
//!   notifies holds PostgreSQL's one notification lock through its commit's WAL flush, so
//!   notifying commits take turns across the whole server: the facts children report (event
//!   batches, output, usage) and heartbeats, committed hundreds of times a second by a busy
//!   team, are announced together instead, by one notification at most [`ANNOUNCE_AFTER`]
//!   after the first of them ([`Announcer`]). Every other write notifies with its own commit.
//!   (It exists for `team_load` of `benches/team.rs`: 18 serves × 3 streaming threads spent
//!   most of their time waiting for that lock.)
//! - **A server that goes away.** A request made while the server is down fails at once with
//!   the connection's error (no hang); the writer and the pool reconnect on the next request.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::conn::{PgConn, Url, Watched, CHANGES, FACTS};
use crate::error::{Error, Result};
use crate::store::db::Db;
use crate::store::Conn;

/// How many times a write that lost a deadlock (`40P01`) or a serialization check (`40001`)
/// is run again before its error is returned.
pub const RETRIES: usize = 4;

/// How long a reader checkout waits for a connection: short, so a request made while the
/// server is down fails soon with the reason instead of hanging.
const CHECKOUT: Duration = Duration::from_secs(2);

/// The most readers a store opens at once (while requests run concurrently).
pub const READERS: u32 = 8;

/// How long a reader stays open unused before it is closed. The pool looks every 30 s (r2d2's
/// reaper), so an idle reader closes between this and 30 s later.
pub const READER_IDLE: Duration = Duration::from_secs(10);

/// How the message of a request that found no server starts (`store::is_connection_lost`).
pub const UNREACHABLE: &str = "Could not get a connection to";

/// How long a commit of children's facts ([`Announce::Later`]) may go unannounced to the
/// change watches of other processes. A serve's own reads see its commits at once.
pub const ANNOUNCE_AFTER: Duration = Duration::from_millis(100);

/// How a write's commit reaches the change watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Announce {
    /// With the commit itself (when the transaction wrote).
    Now,
    /// Within [`ANNOUNCE_AFTER`], together with the other such commits ([`Announcer`]).
    Later,
}

/// The announcement owed for commits made with [`Announce::Later`]: when it is due, and the
/// thread that sends it (started with the first such commit; it ends with the store).
struct Announcer {
    due: Mutex<Option<std::time::Instant>>,
    wake: std::sync::Condvar,
    started: std::sync::Once,
}

impl Default for Announcer {
    fn default() -> Announcer {
        Announcer {
            due: Mutex::new(None),
            wake: std::sync::Condvar::new(),
            started: std::sync::Once::new(),
        }
    }
}

/// The pool's way to open and check a reader.
pub struct Readers(Url);

impl r2d2::ManageConnection for Readers {
    type Connection = PgConn;
    type Error = Error;

    fn connect(&self) -> Result<PgConn> {
        // Readers only read, as SQLite's (`query_only`): a write through one is refused.
        let conn = self.0.connect(None)?;
        conn.batch("SET default_transaction_read_only = on")?;
        Ok(conn)
    }

    fn is_valid(&self, conn: &mut PgConn) -> Result<()> {
        conn.batch("")
    }

    fn has_broken(&self, conn: &mut PgConn) -> bool {
        conn.is_closed()
    }
}

/// An open PostgreSQL store.
pub struct PgStore {
    url: Url,
    writer: Arc<Mutex<Option<PgConn>>>,
    announcer: Arc<Announcer>,
    watches: Arc<Watches>,
    readers: r2d2::Pool<Readers>,
}

impl PgStore {
    /// Connects to `url`, brings its schema up to date (under the migration lock), and opens
    /// the reader pool. With `create` false, a database without threadbase's tables is refused
    /// untouched (a command that changes rows, such as `stop` or `restore`).
    pub fn open(url: &str, create: bool) -> Result<PgStore> {
        let url = Url::parse(url)?;
        let mut writer = url.connect(None)?;
        if !create && !has_schema(&writer)? {
            return Err(Error::io(format!(
                "{url} holds no threadbase tables; nothing was changed. Repair: point --db (or THREADBASE_DB) at the team's threadbase database, or run `threadbase serve` against this one first."
            ))
            .naming_database());
        }
        writer.migrate()?;
        // Readers open on demand and close once idle (issue 46: a serve holds at most three
        // connections at rest, its writer, its row watcher's and the reader its watcher's
        // once-a-second checks keep warm), so many serves, children's included, fit in the
        // server's max_connections. A busy serve keeps its readers: requests come far more
        // often than READER_IDLE.
        let readers = r2d2::Pool::builder()
            .max_size(READERS)
            .min_idle(Some(0))
            .idle_timeout(Some(READER_IDLE))
            .test_on_check_out(false)
            .connection_timeout(CHECKOUT)
            .build(Readers(url.clone()))
            .map_err(|e| Error::io(format!("Cannot open connections to {url}: {e}. Repair: check that the server is running and accepts more connections (max_connections).")))?;
        Ok(PgStore {
            watches: Arc::new(Watches {
                url: url.clone(),
                newest: Mutex::new((0, std::sync::Weak::new())),
            }),
            url,
            writer: Arc::new(Mutex::new(Some(writer))),
            announcer: Arc::default(),
            readers,
        })
    }

    /// The URL as shown (no password).
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// A reader from the pool.
    pub fn read(&self) -> Result<r2d2::PooledConnection<Readers>> {
        // A connection the server closed (a restart) is dropped here, not handed out: the pool
        // discards it as broken and the next checkout opens a new one.
        for _ in 0..=self.readers.max_size() {
            let conn = self.readers.get().map_err(|e| {
                let why = match self.url.connect(None) {
                    Err(c) => c.message,
                    Ok(_) => format!(
                        "{e}. Repair: retry; if it persists, check the server's max_connections."
                    ),
                };
                Error::io(format!(
                    "{UNREACHABLE} {}; the request wrote nothing. {why}",
                    self.url
                ))
            })?;
            if !conn.is_closed() {
                return Ok(conn);
            }
        }
        Err(Error::io(format!(
            "{UNREACHABLE} {}: every connection was closed by the server. Repair: retry; the server restarted or dropped the connections.",
            self.url
        )))
    }

    /// Runs `f` in one transaction, first taking the advisory lock `lock` (a pair of keys,
    /// `pg_advisory_xact_lock(k1, k2)`) when given; commits when it returns `Ok` (notifying the
    /// change watches as `announce` says), rolls back otherwise. A transaction that lost a
    /// deadlock or a serialization check is rolled back and run again, up to [`RETRIES`] times.
    pub fn write<T>(
        &self,
        lock: Option<(i32, i32)>,
        announce: Announce,
        mut f: impl FnMut(&Conn) -> Result<T>,
    ) -> Result<T> {
        let mut slot = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        // A write announced with its commit while an announcement is owed notifies even if it
        // changed nothing, and settles what is owed.
        let owed = self
            .announcer
            .due
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        let mut tries = 0;
        let out = loop {
            if slot.as_ref().is_none_or(PgConn::is_closed) {
                *slot = None;
                *slot = Some(self.url.connect(None)?);
            }
            let conn = slot.as_ref().expect("connected above");
            match attempt(conn, lock, announce, owed, &mut f) {
                Err(e) if tries < RETRIES && is_retryable(&e) => {
                    tries += 1;
                    // A short pause, longer each time, so the winner commits first.
                    std::thread::sleep(Duration::from_millis(2 << tries));
                }
                out => break out,
            }
        };
        let (out, made) = match out {
            Ok((out, made)) => (out, made),
            Err(e) => return Err(e),
        };
        if made == Announce::Now && owed {
            // Its notification, sent after every commit before it, announced those too.
            self.announcer
                .due
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
        }
        drop(slot);
        if made == Announce::Later {
            self.announce_later();
        }
        Ok(out)
    }

    /// Owes the change watches one announcement within [`ANNOUNCE_AFTER`] (the first commit
    /// since the last one sets when).
    fn announce_later(&self) {
        let mut due = self.announcer.due.lock().unwrap_or_else(|p| p.into_inner());
        if due.is_none() {
            *due = Some(std::time::Instant::now() + ANNOUNCE_AFTER);
            self.announcer.wake.notify_one();
        }
        drop(due);
        self.announcer.started.call_once(|| {
            let (writer, announcer, url) = (
                Arc::downgrade(&self.writer),
                Arc::downgrade(&self.announcer),
                self.url.clone(),
            );
            let spawned = std::thread::Builder::new()
                .name("threadbase-announce".into())
                .spawn(move || announce_loop(&writer, &announcer, &url));
            if let Err(e) = spawned {
                tracing::warn!("the change announcer did not start ({e}); other processes see children's facts with the next other write");
            }
        });
    }

    /// Where this store's change watches are opened, and the newest one's count read
    /// ([`Watches`]).
    pub fn watches(&self) -> &Arc<Watches> {
        &self.watches
    }
}

/// One store's change watches: connections of their own that count the commits of every
/// connection ([`Watched`]). The newest one still open is shared ([`Watches::shared`]), so that
/// a serve's other readers of the count (the answers kept in memory) need no connection of
/// their own; a watch reopened after its connection was lost becomes the newest.
pub struct Watches {
    url: Url,
    /// How many watches were opened, and the newest.
    newest: Mutex<(u64, std::sync::Weak<Watched>)>,
}

impl Watches {
    /// Opens a change watch and makes it the shared one. With it, the offset of its counts:
    /// its opening's number `<< 40`, so that a count of a newer watch never equals an older
    /// one's (notifications were lost in between).
    pub fn open(&self) -> Result<(PgConn, i64)> {
        let (conn, watched) = watch(&self.url)?;
        let mut newest = self.newest.lock().unwrap_or_else(|p| p.into_inner());
        newest.0 += 1;
        newest.1 = Arc::downgrade(&watched);
        Ok((conn, (newest.0 as i64) << 40))
    }

    /// The count of the newest change watch, with its offset ([`Watches::open`]); `None`
    /// when it is closed or gone (a serve's row watcher holds one while it is not degraded).
    pub fn shared(&self) -> Option<i64> {
        let newest = self.newest.lock().unwrap_or_else(|p| p.into_inner());
        let watched = newest.1.upgrade()?;
        if watched.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return None;
        }
        let count = watched.count.load(std::sync::atomic::Ordering::SeqCst);
        Some(((newest.0 as i64) << 40) + count)
    }
}

impl Drop for PgStore {
    /// An announcement still owed is sent now, so a command's last facts reach the watches.
    fn drop(&mut self) {
        let owed = self
            .announcer
            .due
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .is_some();
        if owed {
            if let Some(conn) = self
                .writer
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
            {
                let _ = conn.batch(&format!("SELECT pg_notify('{CHANGES}', '{FACTS}')"));
            }
        }
    }
}

/// The announcer's thread: sleeps until an announcement is due, then sends it on the writer
/// connection (a transaction of its own). Ends when the store is dropped.
fn announce_loop(
    writer: &std::sync::Weak<Mutex<Option<PgConn>>>,
    announcer: &std::sync::Weak<Announcer>,
    url: &Url,
) {
    loop {
        let Some(a) = announcer.upgrade() else {
            return;
        };
        let due = a.due.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        match *due {
            Some(at) if at <= now => {}
            // Not due yet, or nothing owed: wait (at most a second, to see the store end).
            Some(at) => {
                drop(a.wake.wait_timeout(due, at - now));
                continue;
            }
            None => {
                drop(a.wake.wait_timeout(due, Duration::from_secs(1)));
                continue;
            }
        }
        drop(due);
        let Some(writer) = writer.upgrade() else {
            return;
        };
        let mut slot = writer.lock().unwrap_or_else(|p| p.into_inner());
        // Taken under the writer's lock: a write that commits from here on is announced by
        // the next round.
        a.due.lock().unwrap_or_else(|p| p.into_inner()).take();
        if slot.as_ref().is_none_or(PgConn::is_closed) {
            *slot = url.connect(None).ok();
        }
        if let Some(conn) = slot.as_ref() {
            if let Err(e) = conn.batch(&format!("SELECT pg_notify('{CHANGES}', '{FACTS}')")) {
                tracing::debug!("announcing children's facts failed: {e}");
            }
        }
    }
}

/// One try of [`PgStore::write`]: its value, and how its commit was announced (`Now` for a
/// facts write that asked for it, [`crate::store::Conn::announce_now`]).
fn attempt<T>(
    conn: &PgConn,
    lock: Option<(i32, i32)>,
    announce: Announce,
    owed: bool,
    f: &mut impl FnMut(&Conn) -> Result<T>,
) -> Result<(T, Announce)> {
    match lock {
        Some((k1, k2)) => {
            conn.batch(&format!("BEGIN; SELECT pg_advisory_xact_lock({k1}, {k2})"))?
        }
        None => conn.batch("BEGIN")?,
    }
    conn.take_announce_now();
    let out = match f(Conn::of_db(conn)) {
        Ok(out) => out,
        Err(e) => {
            let _ = conn.batch("ROLLBACK");
            return Err(e);
        }
    };
    let announce = if conn.take_announce_now() {
        Announce::Now
    } else {
        announce
    };
    // Notify only when the transaction wrote (it has an id then): as SQLite's data_version,
    // a write that changed nothing wakes no watcher.
    let commit = match announce {
        Announce::Now if owed => format!("SELECT pg_notify('{CHANGES}', ''); COMMIT"),
        Announce::Now => format!(
            "SELECT pg_notify('{CHANGES}', '') WHERE pg_current_xact_id_if_assigned() IS NOT NULL; COMMIT"
        ),
        Announce::Later => "COMMIT".to_owned(),
    };
    if let Err(e) = conn.batch(&commit) {
        let _ = conn.batch("ROLLBACK");
        return Err(e);
    }
    Ok((out, announce))
}

/// Whether `e` is PostgreSQL's deadlock (`40P01`) or serialization failure (`40001`): the
/// transaction was rolled back whole and can be run again.
fn is_retryable(e: &Error) -> bool {
    matches!(e.cause(), Some(crate::error::Cause::Database(c))
        if c.downcast_ref::<tokio_postgres::Error>()
            .and_then(tokio_postgres::Error::code)
            .is_some_and(|c| matches!(c.code(), "40P01" | "40001")))
}

/// A listening connection to `url` and what it counts.
pub fn watch(url: &Url) -> Result<(PgConn, Arc<Watched>)> {
    let watched = Arc::new(Watched::default());
    let conn = url.connect(Some(watched.clone()))?;
    Ok((conn, watched))
}

/// Whether the database already holds threadbase's schema history.
fn has_schema(conn: &PgConn) -> Result<bool> {
    conn.scalar_bool("SELECT to_regclass('refinery_schema_history') IS NOT NULL")
}

/// Opens `url` for reading only (`threadbase sql`, `top`, the inspection commands): every
/// transaction is read-only and a statement stops after `timeout`. A database without
/// threadbase's tables is refused.
pub fn open_read_only(url: &str, timeout: Duration) -> Result<(PgConn, Arc<Watched>, Url)> {
    let url = Url::parse(url)?;
    let (conn, watched) = watch(&url)?;
    if !has_schema(&conn)? {
        return Err(Error::io(format!(
            "{url} holds no threadbase tables. Repair: point --db (or THREADBASE_DB) at the team's threadbase database."
        ))
        .naming_database());
    }
    conn.batch(&format!(
        "SET default_transaction_read_only = on; SET statement_timeout = {}",
        timeout.as_millis()
    ))?;
    Ok((conn, watched, url))
}
