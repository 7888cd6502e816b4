//! A PostgreSQL connection as the store's backend ([`crate::store::db::Db`]).
//!
//! The store's functions are synchronous and run on serve's tokio workers, on `block_in_place`
//! threads and on plain threads alike. tokio-postgres is asynchronous: a call is run to
//! completion on the calling thread, which also reads and writes the connection's socket and
//! blocks on it while it waits ([`SocketAt`], [`super::direct`]); no runtime is needed there
//! (the sync `postgres` client would start a runtime of its own and panic inside serve's).
//! Only listening connections (change watches) run as tasks, on a small runtime of their own
//! ([`runtime`], one worker thread): they must read notifications as they come.
//!
//! Values cross as the store's own [`Value`] and [`Cell`]: a parameter is encoded for the type
//! PostgreSQL inferred for it when the statement was prepared (an integer bound where text is
//! wanted is written as its digits, text bound to `jsonb` as the document), and a column is
//! decoded by its type (`jsonb` as its text, `numeric` as an integer when it has no fraction,
//! `bool` as 0 or 1, as SQLite gives them).

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};
use tokio_postgres::{AsyncMessage, Client, Config, NoTls, Statement};

use crate::error::{Cause, Error, Result};
use crate::store::db::{Cell, Db, Params, Query, Row, Value};

/// The channel every write notifies on commit, and every change watch listens to.
pub const CHANGES: &str = "threadbase_changes";

/// The payload of a notification that announces only facts children reported (events,
/// output, usage) and heartbeats: no command, notice, question or thread state changed.
pub const FACTS: &str = "f";

/// The runtime that drives every connection's socket (one worker: the work is I/O).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("threadbase-postgres")
            .enable_all()
            .build()
            .expect("the PostgreSQL runtime starts")
    })
}

/// Runs `f` to completion on this thread.
pub fn block_on<F: Future>(f: F) -> F::Output {
    futures_executor::block_on(f)
}

/// Whether `db` names a PostgreSQL database (`postgres://…` or `postgresql://…`) rather than a
/// SQLite file.
pub fn is_url(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

/// A parsed database URL and how it is shown (never with its password).
#[derive(Clone)]
pub struct Url {
    config: Config,
    shown: String,
}

impl std::fmt::Debug for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// `url` with any password replaced by `***`, for messages about a URL that did not parse.
fn hide_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (auth, host) = match rest.rfind('@') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => return url.to_owned(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{host}"),
        None => url.to_owned(),
    }
}

/// `db` without its password, and the password: a command moves a URL's password into
/// `PGPASSWORD` (PostgreSQL's own variable, which [`Url::parse`] reads when the URL has none,
/// and which the serve's children inherit), so that no message, log line or child's
/// `THREADBASE_DB` shows it.
pub fn split_password(db: &str) -> (String, Option<String>) {
    let Ok(config) = db.parse::<Config>() else {
        return (db.to_owned(), None);
    };
    let Some(password) = config.get_password() else {
        return (db.to_owned(), None);
    };
    let password = String::from_utf8_lossy(password).into_owned();
    let Some((scheme, rest)) = db.split_once("://") else {
        return (db.to_owned(), None);
    };
    let Some(at) = rest.rfind('@') else {
        return (db.to_owned(), None);
    };
    let user = rest[..at].split_once(':').map_or(&rest[..at], |(u, _)| u);
    (format!("{scheme}://{user}{}", &rest[at..]), Some(password))
}

impl Url {
    /// Parses a `postgres://` URL; a malformed one is an error that shows it without its
    /// password. Without a password in the URL, `PGPASSWORD` is used when set.
    pub fn parse(url: &str) -> Result<Url> {
        let mut config: Config = url.parse().map_err(|e| {
            Error::invalid(format!(
                "The database URL {} is not a valid PostgreSQL URL ({e}). Repair: write it as postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE (--db or THREADBASE_DB).",
                hide_password(url)
            ))
        })?;
        if config.get_password().is_none() {
            if let Some(pw) = std::env::var_os("PGPASSWORD").filter(|p| !p.is_empty()) {
                config.password(pw.to_string_lossy().as_bytes());
            }
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(10));
        }
        config.application_name("threadbase");
        let host = config
            .get_hosts()
            .first()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(h) => h.clone(),
                tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
            })
            .unwrap_or_else(|| "localhost".into());
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let user = config.get_user().unwrap_or("");
        let db = config.get_dbname().unwrap_or(user);
        let shown = if user.is_empty() {
            format!("postgres://{host}:{port}/{db}")
        } else {
            format!("postgres://{user}@{host}:{port}/{db}")
        };
        Ok(Url { config, shown })
    }

    /// Opens a connection (its socket driven by its callers, or by [`runtime`] when it
    /// listens: [`SocketAt`]); `changes`, when given, counts the notifications of [`CHANGES`]
    /// it receives (the connection LISTENs).
    pub fn connect(&self, changes: Option<Arc<Watched>>) -> Result<PgConn> {
        let Some(watched) = changes else {
            // Driven by its callers (see [`SocketAt`]).
            let (client, connection, waiter) =
                super::direct::connect(&self.config).map_err(|e| match e {
                    super::direct::Failed::Io(e) => self.unreachable(&e.to_string(), Arc::new(e)),
                    super::direct::Failed::Server(e) => self.connect_error(e),
                })?;
            return Ok(PgConn {
                client,
                socket: SocketAt::Caller {
                    socket: RefCell::new(Some(Box::new(connection))),
                    waiter,
                },
                prepared: RefCell::new(HashMap::new()),
                announce_now: std::cell::Cell::new(false),
                watched: None,
            });
        };
        let config = self.config.clone();
        let counts = watched.clone();
        let task = runtime().spawn(async move {
            let (client, mut connection) = config.connect(NoTls).await?;
            // A listening connection must read its notifications as they come: a task here.
            tokio::spawn(async move {
                loop {
                    match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                        Some(Ok(AsyncMessage::Notification(n))) => {
                            // Facts children reported, announced together (`FACTS`), are
                            // counted apart too: nothing but them changed.
                            if n.payload() == FACTS {
                                counts.facts.fetch_add(1, Ordering::SeqCst);
                            }
                            counts.count.fetch_add(1, Ordering::SeqCst);
                        }
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => break,
                    }
                }
                counts.closed.store(true, Ordering::SeqCst);
            });
            Ok::<_, tokio_postgres::Error>(client)
        });
        let client = block_on(task)
            .map_err(|e| {
                Error::internal(format!(
                    "The PostgreSQL connection task failed: {e}. Repair: retry."
                ))
            })?
            .map_err(|e| self.connect_error(e))?;
        let conn = PgConn {
            client,
            socket: SocketAt::Runtime,
            prepared: RefCell::new(HashMap::new()),
            announce_now: std::cell::Cell::new(false),
            watched: Some(watched),
        };
        conn.batch(&format!("LISTEN {CHANGES}"))?;
        Ok(conn)
    }

    /// What a failed connection attempt says: the server, what went wrong and how to repair
    /// it, never the password.
    fn connect_error(&self, e: tokio_postgres::Error) -> Error {
        let url = &self.shown;
        let user = self.config.get_user().unwrap_or("(none)");
        let db = self.config.get_dbname().unwrap_or(user);
        let message = match e.code() {
            Some(c) if *c == SqlState::INVALID_PASSWORD || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION => format!(
                "PostgreSQL at {url} refused user {user}: authentication failed. Repair: check the user and password in the URL (--db or THREADBASE_DB), or the server's pg_hba.conf."
            ),
            // The server's max_connections, or the role's or database's CONNECTION LIMIT.
            Some(c) if *c == SqlState::TOO_MANY_CONNECTIONS => {
                let why = e.as_db_error().map(|d| d.message().to_string()).unwrap_or_else(|| e.to_string());
                format!(
                    "PostgreSQL at {url} refused a new connection for user {user}: {why} (the server's max_connections, or a CONNECTION LIMIT of the role or database, is reached). Repair: raise max_connections (each serve, children's included, holds up to 3 connections at rest and up to 10 when busy: docs/configuration.md), or end sessions that are not needed; a serve retries on its own."
                )
            }
            Some(c) if *c == SqlState::INVALID_CATALOG_NAME => format!(
                "PostgreSQL at {url} has no database {db}. Repair: create it (createdb {db}) or name an existing one in the URL."
            ),
            _ => {
                let why = std::error::Error::source(&e)
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| e.to_string());
                // The server asked for a password and neither the URL nor PGPASSWORD gave one:
                // it was reached, so its host and port are right.
                if why == "password missing" && self.config.get_password().is_none() {
                    format!(
                        "PostgreSQL at {url} asks user {user} for a password and none was given. Repair: set PGPASSWORD to user {user}'s password in the environment threadbase runs in (children inherit it; keep it out of the URL, since a command line is visible to every user of the host)."
                    )
                } else {
                    return self.unreachable(&why, Arc::new(e));
                }
            }
        };
        Error::io(message)
            .naming_database()
            .caused_by(Cause::Database(Arc::new(e)))
    }

    /// The server could not be reached (`why`; the socket's or tokio-postgres's error `e`,
    /// which `store::is_connection_lost` recognises).
    fn unreachable(&self, why: &str, e: Arc<dyn std::error::Error + Send + Sync>) -> Error {
        let url = &self.shown;
        Error::io(format!(
            "Cannot connect to PostgreSQL at {url}: {why}. Repair: check that the server is running and reachable, and that the URL's host and port are right (--db or THREADBASE_DB)."
        ))
        .naming_database()
        .caused_by(Cause::Database(e))
    }

    /// The URL as shown in messages (no password).
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

/// What a listening connection saw: how many change notifications, and whether its socket
/// closed (notifications are lost while it is down: the watcher rescans after a reconnect).
#[derive(Default)]
pub struct Watched {
    pub count: AtomicI64,
    /// Of `count`, the announcements of children's facts alone ([`FACTS`]).
    pub facts: AtomicI64,
    pub closed: AtomicBool,
}

/// A connection's socket: the half of tokio-postgres that writes requests and reads responses.
type Socket = tokio_postgres::Connection<super::direct::Direct, tokio_postgres::tls::NoTlsStream>;

/// Where a connection's socket is driven.
///
/// A connection that does not listen is driven by the thread that calls
/// ([`super::direct`]): every call writes its request and reads its response on that thread,
/// which blocks on the socket itself in between. For the row `serve_pg/poll_id` of
/// `benches/serve.rs`: driven by a task on [`runtime`], a round trip woke that runtime's thread
/// twice (the request handed over, then the response handed back), 326 µs a poll against
/// 161 µs; then with the socket polled by the caller but its readiness still from tokio's
/// reactor, once.
enum SocketAt {
    /// Here; `socket` is `None` once it ended (the server went away, or an error).
    Caller {
        socket: RefCell<Option<Box<Socket>>>,
        waiter: super::direct::Waiter,
    },
    /// A task on [`runtime`]: a listening connection must read notifications as they come.
    Runtime,
}

impl SocketAt {
    /// Runs `f` (a call of the connection's client) to completion on this thread, driving the
    /// socket meanwhile when it is here. A socket that ends is dropped, so that `f` then fails
    /// with the client's error.
    fn run<F: Future>(&self, f: F) -> Result<F::Output> {
        let SocketAt::Caller { socket, waiter } = self else {
            return Ok(block_on(f));
        };
        let drive = |cx: &mut std::task::Context<'_>| {
            let mut socket = socket.borrow_mut();
            match socket
                .as_mut()
                .map(|s| std::pin::Pin::new(&mut **s).poll(cx))
            {
                Some(std::task::Poll::Pending) => std::task::Poll::Pending,
                Some(std::task::Poll::Ready(_)) => {
                    *socket = None;
                    std::task::Poll::Ready(())
                }
                None => std::task::Poll::Ready(()),
            }
        };
        match super::direct::run(waiter, None, f, drive) {
            Ok(Some(out)) => Ok(out),
            Ok(None) => unreachable!("no deadline was given"),
            Err(e) => {
                *socket.borrow_mut() = None;
                Err(Error::io(format!(
                    "Waiting for PostgreSQL's answer failed: {e}. Repair: retry; if it persists, check the server."
                ))
                .naming_database()
                .caused_by(Cause::Database(Arc::new(e))))
            }
        }
    }

    /// For a socket here: reads what the server sent while nobody called (a notice, or that
    /// it closed the connection) without waiting; true when the socket has ended.
    fn ended(&self) -> bool {
        let SocketAt::Caller { socket, .. } = self else {
            return false;
        };
        let mut socket = socket.borrow_mut();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let ended = match socket.as_mut() {
            Some(s) => std::pin::Pin::new(&mut **s).poll(&mut cx).is_ready(),
            None => true,
        };
        if ended {
            *socket = None;
        }
        ended
    }
}

/// One connection: its client, where its socket runs, and its prepared statements, by query
/// name.
pub struct PgConn {
    client: Client,
    socket: SocketAt,
    prepared: RefCell<HashMap<&'static str, Statement>>,
    watched: Option<Arc<Watched>>,
    /// A write of facts that changed more than facts (a phase, a notice): its commit is
    /// announced at once ([`Db::announce_now`]).
    announce_now: std::cell::Cell<bool>,
}

impl PgConn {
    /// Whether the transaction asked to be announced with its commit, clearing the ask.
    pub fn take_announce_now(&self) -> bool {
        self.announce_now.replace(false)
    }
}

impl PgConn {
    /// Runs `f` (a call of this connection's client) to completion on this thread.
    fn run<T, E>(&self, f: impl Future<Output = std::result::Result<T, E>>) -> Result<T>
    where
        Error: From<E>,
    {
        Ok(self.socket.run(f)??)
    }

    /// Brings the schema up to date (`migrate`).
    pub fn migrate(&mut self) -> Result<Vec<super::migrate::Applied>> {
        let PgConn { client, socket, .. } = self;
        socket.run(super::migrate::migrate(client))?
    }

    /// The one boolean `sql` selects.
    pub fn scalar_bool(&self, sql: &str) -> Result<bool> {
        Ok(self.run(self.client.query_one(sql, &[]))?.try_get(0)?)
    }

    /// Whether the socket closed (the server went away).
    pub fn is_closed(&self) -> bool {
        self.socket.ended() || self.client.is_closed()
    }

    fn statement(&self, q: &Query) -> Result<Statement> {
        if let Some(s) = self.prepared.borrow().get(q.name) {
            return Ok(s.clone());
        }
        let text = q.postgres.get_or_init(|| {
            super::queries::find(q.name)
                .map(|found| found.postgres())
                .unwrap_or_else(|| {
                    super::params::positional(&super::queries::expand_rows((q.sqlite)()))
                })
        });
        let stmt = self.run(self.client.prepare(&text.sql))?;
        self.prepared.borrow_mut().insert(q.name, stmt.clone());
        Ok(stmt)
    }

    /// The values of `p` in `$N` order.
    fn values<'p>(&self, q: &Query, stmt: &Statement, p: Params<'p>) -> Result<Vec<Value<'p>>> {
        let expected = stmt.params().len();
        let wrong = |given: usize| q.wrong_count(expected, given);
        match p {
            Params::At(values) => {
                if values.len() != expected {
                    return Err(wrong(values.len()));
                }
                Ok(values.iter().map(|v| v.value()).collect())
            }
            Params::IfUsed(values) => {
                let names = q.postgres.get().expect("prepared before binding");
                let mut out = vec![None; expected];
                for (name, v) in values {
                    if let Some(at) = names.position_of(name) {
                        out[at - 1] = Some(v.value());
                    }
                }
                out.into_iter()
                    .enumerate()
                    .map(|(i, v)| {
                        v.ok_or_else(|| {
                            Error::internal(format!(
                                "sql/{}.sql's parameter ${} was given no value. Repair: this is a bug in threadbase; report it with the command that failed.",
                                q.name,
                                i + 1
                            ))
                        })
                    })
                    .collect()
            }
            Params::Named(values) => {
                if values.len() != expected {
                    return Err(wrong(values.len()));
                }
                let names = q.postgres.get().expect("prepared before binding");
                let mut out = vec![Value::Null; expected];
                for (name, v) in values {
                    let Some(at) = names.position_of(name) else {
                        return Err(q.no_parameter(name));
                    };
                    out[at - 1] = v.value();
                }
                Ok(out)
            }
        }
    }
}

impl Db for PgConn {
    fn each(
        &self,
        q: &Query,
        p: Params<'_>,
        f: &mut dyn FnMut(&Row<'_>) -> Result<bool>,
    ) -> Result<()> {
        let stmt = self.statement(q)?;
        let values = self.values(q, &stmt, p)?;
        let bound: Vec<Bound<'_>> = values.iter().map(Bound).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|b| b as _).collect();
        let rows = self.run(self.client.query(&stmt, &refs))?;
        let mut cells: Vec<Cell<'_>> = Vec::new();
        for r in &rows {
            cells.clear();
            for i in 0..r.len() {
                let c: RawCell<'_> = r.try_get(i)?;
                cells.push(c.0);
            }
            let read = &cells[..];
            if !f(&Row::new(&read, q.name))? {
                break;
            }
        }
        Ok(())
    }

    fn execute(&self, q: &Query, p: Params<'_>) -> Result<usize> {
        let stmt = self.statement(q)?;
        let values = self.values(q, &stmt, p)?;
        let bound: Vec<Bound<'_>> = values.iter().map(Bound).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = bound.iter().map(|b| b as _).collect();
        Ok(self.run(self.client.execute(&stmt, &refs))? as usize)
    }

    fn batch(&self, sql: &str) -> Result<()> {
        self.run(self.client.batch_execute(sql))
    }

    fn begin_read(&self) -> Result<()> {
        self.batch("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    }

    fn end_read(&self) {
        if self.batch("COMMIT").is_err() {
            let _ = self.batch("ROLLBACK");
        }
    }

    fn advisory_lock(&self, (k1, k2): (i32, i32)) -> Result<()> {
        self.batch(&format!("SELECT pg_advisory_xact_lock({k1}, {k2})"))
    }

    fn query_values(&self, sql: &str) -> Result<(Vec<String>, Vec<Vec<Value<'static>>>)> {
        let stmt = self.run(self.client.prepare(sql))?;
        let names = stmt.columns().iter().map(|c| c.name().to_owned()).collect();
        let rows = self.run(self.client.query(&stmt, &[]))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let mut values = Vec::with_capacity(r.len());
            for i in 0..r.len() {
                let c: RawCell<'_> = r.try_get(i)?;
                let one: &[Cell<'_>] = &[c.0];
                values.push(Row::new(&one, "adhoc").get::<Value<'static>>(0)?);
            }
            out.push(values);
        }
        Ok((names, out))
    }

    fn change_count(&self) -> Result<i64> {
        let Some(w) = &self.watched else {
            return Err(Error::internal(
                "A change count was asked of a PostgreSQL connection that does not listen. Repair: this is a bug in threadbase; report it.",
            ));
        };
        if w.closed.load(Ordering::SeqCst) || self.client.is_closed() {
            return Err(Error::io(
                "The connection that watches PostgreSQL for changes was lost. Repair: it is reopened by the next check; if this persists, check the server.",
            ));
        }
        Ok(w.count.load(Ordering::SeqCst))
    }

    fn rows_change_count(&self) -> Result<Option<i64>> {
        let all = self.change_count()?;
        let facts = self
            .watched
            .as_ref()
            .map_or(0, |w| w.facts.load(Ordering::SeqCst));
        Ok(Some(all - facts))
    }

    fn announce_now(&self) {
        self.announce_now.set(true);
    }
}

// ---- values -----------------------------------------------------------------------------------

/// A parameter's value, encoded for the type PostgreSQL inferred for it.
#[derive(Debug)]
struct Bound<'a>(&'a Value<'a>);

type BoxError = Box<dyn std::error::Error + Sync + Send>;

fn texty(ty: &Type) -> bool {
    matches!(
        *ty,
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN
    )
}

impl ToSql for Bound<'_> {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
        match self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(v) => int_to_sql(*v, ty, out),
            Value::Real(v) => match *ty {
                Type::FLOAT8 => v.to_sql(ty, out),
                Type::FLOAT4 => (*v as f32).to_sql(ty, out),
                Type::NUMERIC => numeric_to_sql(&format!("{v}"), out),
                Type::INT8 | Type::INT4 | Type::INT2 if v.fract() == 0.0 => {
                    int_to_sql(*v as i64, ty, out)
                }
                ref t if texty(t) => {
                    out.put_slice(format!("{v}").as_bytes());
                    Ok(IsNull::No)
                }
                _ => Err(format!("a real cannot be bound to a {ty} parameter").into()),
            },
            Value::Text(t) => match *ty {
                Type::JSONB => {
                    out.put_u8(1);
                    out.put_slice(t.as_bytes());
                    Ok(IsNull::No)
                }
                Type::JSON | Type::BYTEA => {
                    out.put_slice(t.as_bytes());
                    Ok(IsNull::No)
                }
                Type::INT8 | Type::INT4 | Type::INT2 => {
                    let v: i64 = t
                        .trim()
                        .parse()
                        .map_err(|_| format!("{t:?} is not an integer ({ty} parameter)"))?;
                    int_to_sql(v, ty, out)
                }
                Type::FLOAT8 | Type::FLOAT4 | Type::NUMERIC => {
                    let v: f64 = t
                        .trim()
                        .parse()
                        .map_err(|_| format!("{t:?} is not a number ({ty} parameter)"))?;
                    Bound(&Value::Real(v)).to_sql(ty, out)
                }
                Type::BOOL => {
                    out.put_u8(matches!(t.as_ref(), "1" | "true" | "t") as u8);
                    Ok(IsNull::No)
                }
                _ => {
                    out.put_slice(t.as_bytes());
                    Ok(IsNull::No)
                }
            },
            Value::Blob(b) => match *ty {
                ref t if texty(t) || *t == Type::JSON => {
                    std::str::from_utf8(b)?;
                    out.put_slice(b);
                    Ok(IsNull::No)
                }
                Type::JSONB => {
                    std::str::from_utf8(b)?;
                    out.put_u8(1);
                    out.put_slice(b);
                    Ok(IsNull::No)
                }
                _ => {
                    out.put_slice(b);
                    Ok(IsNull::No)
                }
            },
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn int_to_sql(v: i64, ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
    match *ty {
        Type::INT8 => v.to_sql(ty, out),
        Type::INT4 => i32::try_from(v)?.to_sql(ty, out),
        Type::INT2 => i16::try_from(v)?.to_sql(ty, out),
        Type::OID => u32::try_from(v)?.to_sql(ty, out),
        Type::FLOAT8 => (v as f64).to_sql(ty, out),
        Type::FLOAT4 => (v as f32).to_sql(ty, out),
        Type::BOOL => (v != 0).to_sql(ty, out),
        Type::NUMERIC => numeric_to_sql(&v.to_string(), out),
        Type::JSONB => {
            out.put_u8(1);
            out.put_slice(v.to_string().as_bytes());
            Ok(IsNull::No)
        }
        _ => {
            out.put_slice(v.to_string().as_bytes());
            Ok(IsNull::No)
        }
    }
}

/// A decimal (`-12.5`, `3e-7` is refused) in `numeric`'s binary form: base-10000 digits.
fn numeric_to_sql(text: &str, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return Err(format!("{text} cannot be written as a numeric").into());
    }
    let int = int.trim_start_matches('0');
    // Pad the integer part on the left and the fraction on the right to whole groups of 4.
    let int_pad = (4 - int.len() % 4) % 4;
    let frac_pad = (4 - frac.len() % 4) % 4;
    let all = format!("{}{int}{frac}{}", "0".repeat(int_pad), "0".repeat(frac_pad));
    let groups: Vec<i16> = all
        .as_bytes()
        .chunks(4)
        .map(|c| std::str::from_utf8(c).unwrap().parse::<i16>().unwrap())
        .collect();
    let int_groups = (int.len() + int_pad) / 4;
    let weight = int_groups as i16 - 1;
    // Trim zero groups at both ends (the weight says where the point is).
    let first = groups.iter().position(|g| *g != 0);
    let (digits, weight) = match first {
        None => (Vec::new(), 0),
        Some(first) => {
            let last = groups.iter().rposition(|g| *g != 0).unwrap();
            (groups[first..=last].to_vec(), weight - first as i16)
        }
    };
    out.put_i16(digits.len() as i16);
    out.put_i16(weight);
    out.put_u16(if negative && !digits.is_empty() {
        0x4000
    } else {
        0
    });
    out.put_u16(frac.len() as u16);
    for d in digits {
        out.put_i16(d);
    }
    Ok(IsNull::No)
}

/// A column's value as read, by its type.
struct RawCell<'a>(Cell<'a>);

impl<'a> FromSql<'a> for RawCell<'a> {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> std::result::Result<Self, BoxError> {
        Ok(RawCell(match *ty {
            Type::INT8 => Cell::Int(i64::from_sql(ty, raw)?),
            Type::INT4 => Cell::Int(i32::from_sql(ty, raw)?.into()),
            Type::INT2 => Cell::Int(i16::from_sql(ty, raw)?.into()),
            Type::OID => Cell::Int(u32::from_sql(ty, raw)?.into()),
            Type::BOOL => Cell::Int(bool::from_sql(ty, raw)? as i64),
            Type::FLOAT8 => Cell::Real(f64::from_sql(ty, raw)?),
            Type::FLOAT4 => Cell::Real(f32::from_sql(ty, raw)?.into()),
            Type::NUMERIC => numeric_from_sql(raw)?,
            Type::BYTEA => Cell::Blob(raw),
            Type::JSONB => match raw.split_first() {
                Some((1, text)) => Cell::Text(std::str::from_utf8(text)?),
                _ => return Err("a jsonb value of an unknown version".into()),
            },
            _ => Cell::Text(std::str::from_utf8(raw)?),
        }))
    }

    fn from_sql_null(_: &Type) -> std::result::Result<Self, BoxError> {
        Ok(RawCell(Cell::Null))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// `numeric`'s binary form as an integer when it has no fraction and fits, else a real.
fn numeric_from_sql(raw: &[u8]) -> std::result::Result<Cell<'static>, BoxError> {
    let word = |i: usize| -> std::result::Result<i16, BoxError> {
        raw.get(i..i + 2)
            .map(|b| i16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| "a truncated numeric".into())
    };
    let ndigits = word(0)? as usize;
    let weight = word(2)? as i32;
    let sign = word(4)? as u16;
    let dscale = word(6)?;
    if sign == 0xC000 {
        return Ok(Cell::Real(f64::NAN));
    }
    let negative = sign == 0x4000;
    let mut value = 0f64;
    let mut int: Option<i128> = Some(0);
    for i in 0..ndigits {
        let d = word(8 + 2 * i)? as i32;
        let power = weight - i as i32;
        value += d as f64 * 10000f64.powi(power);
        int = match int {
            Some(n) if power >= 0 => 10000i128
                .checked_pow(power as u32)
                .and_then(|p| n.checked_add(d as i128 * p)),
            Some(n) if d == 0 => Some(n),
            _ => None,
        };
    }
    if negative {
        value = -value;
        int = int.map(|n| -n);
    }
    Ok(match int.and_then(|n| i64::try_from(n).ok()) {
        Some(n) if dscale == 0 || value.fract() == 0.0 => Cell::Int(n),
        _ => Cell::Real(value),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_never_shown() {
        let url = Url::parse("postgres://alice:s3cret@db.example:6543/team").unwrap();
        assert_eq!(url.to_string(), "postgres://alice@db.example:6543/team");
        assert_eq!(
            hide_password("postgres://alice:s3cret@db.example:bad/team"),
            "postgres://alice:***@db.example:bad/team"
        );
        let e = Url::parse("postgres://alice:s3cret@db.example:notaport/team").unwrap_err();
        assert!(!e.to_string().contains("s3cret"), "{e}");
        assert!(e.to_string().contains("Repair:"), "{e}");
    }

    #[test]
    fn a_password_moves_out_of_the_url() {
        assert_eq!(
            split_password("postgres://alice:s%40cret@db:5432/team?sslmode=disable"),
            (
                "postgres://alice@db:5432/team?sslmode=disable".to_owned(),
                Some("s@cret".to_owned())
            )
        );
        assert_eq!(
            split_password("postgres://alice@db/team"),
            ("postgres://alice@db/team".to_owned(), None)
        );
    }

    #[test]
    fn numerics_round_trip_through_their_binary_form() {
        for (text, cell) in [
            ("0", Cell::Int(0)),
            ("42", Cell::Int(42)),
            ("-12345678", Cell::Int(-12345678)),
            ("10000", Cell::Int(10000)),
            ("0.5", Cell::Real(0.5)),
            ("-1234.0625", Cell::Real(-1234.0625)),
            ("0.0001", Cell::Real(0.0001)),
        ] {
            let mut out = BytesMut::new();
            numeric_to_sql(text, &mut out).unwrap();
            assert_eq!(numeric_from_sql(&out).unwrap(), cell, "{text}");
        }
    }
}
