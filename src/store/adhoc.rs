//! `threadbase sql`'s statement: one read-only statement on a read-only connection
//! (`query_only`; a statement SQLite does not call read-only is refused before it runs),
//! bounded by a watchdog thread that interrupts it (`sqlite3_interrupt`) when its timeout
//! passes or on Ctrl-C, its rows read as JSON values, those past a row cap counted, not kept.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::types::ValueRef;
use serde_json::Value;

use super::db::Value as DbValue;

use crate::error::{Cause, Error, ErrorCode, Result};

/// The start of the message of a statement stopped by Ctrl-C (its cause is `Cause::CtrlC`;
/// the CLI exits 130 on it, as a command stopped by SIGINT does).
pub const INTERRUPTED: &str = "Interrupted (Ctrl-C)";

/// What one statement read.
#[derive(Debug)]
pub struct Table {
    pub names: Vec<String>,
    pub rows: Vec<Vec<Value>>,
    /// Rows past the cap, counted.
    pub left_out: u64,
    /// Counting them was stopped (then `left_out` is a lower bound).
    pub counting_stopped: Option<Stop>,
}

/// Runs `query` on the database at `db`: at most `timeout_secs` (0 or `None`: no bound),
/// stopped by Ctrl-C when `ctrl_c`, keeping at most `max_rows` rows.
pub fn query(
    db: &Path,
    query: &str,
    timeout_secs: Option<f64>,
    ctrl_c: bool,
    max_rows: Option<usize>,
) -> Result<Table> {
    let timeout = timeout_secs
        .filter(|s| *s > 0.0)
        .map(Duration::from_secs_f64);
    if let Some(url) = super::database_url(db) {
        return match super::postgres::adhoc::query(url, query, timeout.unwrap_or_default())? {
            Ok((names, rows)) => Ok(table_of(names, rows, max_rows)),
            Err(elapsed) => Err(stopped(Stop::Timeout, timeout_secs.unwrap_or(0.0), elapsed)),
        };
    }
    let conn = super::sqlite::open::open_read_only(db)?;
    let mut stmt = conn.prepare(query).map_err(|e| {
        database_fault(e).unwrap_or_else(|e| Error::invalid(format!(
            "Cannot run the SQL: {e}. Repair: pass exactly one valid SELECT statement; list tables with \"SELECT name FROM sqlite_schema\"."
        )))
    })?;
    if !stmt.readonly() {
        return Err(Error::forbidden(
            "threadbase sql is read-only: this statement would change the database and was refused; nothing was written. Repair: use SELECT (or a read-only PRAGMA); changes go through threadbase serve.",
        ));
    }
    let names: Vec<String> = stmt.column_names().iter().map(|s| s.to_string()).collect();
    let started = Instant::now();
    let watchdog = Watchdog::arm(&conn, timeout, ctrl_c);
    let failed = |e: rusqlite::Error| {
        if let Some(stop) = watchdog.fired() {
            return stopped(stop, timeout_secs.unwrap_or(0.0), started.elapsed());
        }
        database_fault(e).unwrap_or_else(|e| {
            Error::invalid(format!("The SQL failed: {e}. Repair: check the statement."))
        })
    };
    let mut rows = stmt.query([]).map_err(failed)?;
    let mut table: Vec<Vec<Value>> = Vec::new();
    // Rows past the cap are counted, not kept; a stop while counting makes it a lower bound.
    let mut left_out: u64 = 0;
    let mut counting_stopped: Option<Stop> = None;
    loop {
        let row = match rows.next() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            Err(e) if left_out > 0 || max_rows.is_some_and(|m| table.len() >= m) => {
                match watchdog.fired() {
                    Some(stop) => {
                        counting_stopped = Some(stop);
                        break;
                    }
                    None => return Err(failed(e)),
                }
            }
            Err(e) => return Err(failed(e)),
        };
        if max_rows.is_some_and(|m| table.len() >= m) {
            left_out += 1;
            continue;
        }
        let mut cells = Vec::with_capacity(names.len());
        for i in 0..names.len() {
            cells.push(to_json(row.get_ref(i)?));
        }
        table.push(cells);
    }
    drop(rows);
    drop(watchdog);
    Ok(Table {
        names,
        rows: table,
        left_out,
        counting_stopped,
    })
}

/// The [`Table`] of a statement read whole (PostgreSQL's): the first `max_rows` rows kept, the
/// rest counted.
fn table_of(names: Vec<String>, rows: Vec<Vec<DbValue<'_>>>, max_rows: Option<usize>) -> Table {
    let keep = max_rows.unwrap_or(usize::MAX);
    let left_out = rows.len().saturating_sub(keep) as u64;
    let rows = rows
        .into_iter()
        .take(keep)
        .map(|r| {
            r.into_iter()
                .map(|v| match v {
                    DbValue::Null => Value::Null,
                    DbValue::Int(i) => Value::from(i),
                    DbValue::Real(f) => Value::from(f),
                    DbValue::Text(t) => Value::from(t.into_owned()),
                    DbValue::Blob(b) => Value::from(String::from_utf8_lossy(&b).into_owned()),
                })
                .collect()
        })
        .collect();
    Table {
        names,
        rows,
        left_out,
        counting_stopped: None,
    }
}

/// Why the watchdog stopped a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Timeout,
    CtrlC,
}

/// A thread that interrupts the connection's statement at the deadline or on Ctrl-C, until it
/// is dropped.
struct Watchdog {
    fired: Arc<OnceLock<Stop>>,
    disarm: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn arm(conn: &rusqlite::Connection, timeout: Option<Duration>, ctrl_c: bool) -> Watchdog {
        let fired: Arc<OnceLock<Stop>> = Arc::default();
        if timeout.is_none() && !ctrl_c {
            return Watchdog {
                fired,
                disarm: None,
                thread: None,
            };
        }
        let handle = conn.get_interrupt_handle();
        let (disarm, disarmed) = tokio::sync::oneshot::channel::<()>();
        let (armed_tx, armed) = std::sync::mpsc::channel::<()>();
        let flag = fired.clone();
        let thread = std::thread::Builder::new()
            .name("sql-watchdog".into())
            .spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    let _ = armed_tx.send(());
                    return;
                };
                rt.block_on(async move {
                    let deadline = async {
                        match timeout {
                            Some(t) => tokio::time::sleep(t).await,
                            None => std::future::pending().await,
                        }
                    };
                    let interrupt = async {
                        if ctrl_c {
                            // Registered before the statement starts (see `armed`).
                            let mut sigint = tokio::signal::unix::signal(
                                tokio::signal::unix::SignalKind::interrupt(),
                            )
                            .ok();
                            let _ = armed_tx.send(());
                            match sigint.as_mut() {
                                Some(s) => {
                                    s.recv().await;
                                }
                                None => std::future::pending().await,
                            }
                        } else {
                            let _ = armed_tx.send(());
                            std::future::pending::<()>().await
                        }
                    };
                    let stop = tokio::select! {
                        _ = disarmed => return,
                        _ = deadline => Stop::Timeout,
                        _ = interrupt => Stop::CtrlC,
                    };
                    let _ = flag.set(stop);
                    handle.interrupt();
                });
            })
            .ok();
        // Ctrl-C must be caught from the statement's first step on.
        let _ = armed.recv_timeout(Duration::from_secs(5));
        Watchdog {
            fired,
            disarm: Some(disarm),
            thread,
        }
    }

    fn fired(&self) -> Option<Stop> {
        self.fired.get().copied()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        if let Some(d) = self.disarm.take() {
            let _ = d.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn seconds(s: f64) -> String {
    format!("{s} s")
}

/// The error for a statement the watchdog stopped after `elapsed` (`timeout_secs`: its bound).
fn stopped(stop: Stop, timeout_secs: f64, elapsed: Duration) -> Error {
    match stop {
        Stop::Timeout => Error::new(
            ErrorCode::Limit,
            format!(
                "The statement ran longer than --timeout {} and was stopped (after {:.1} s); nothing was written. Repair: raise the bound with --timeout SECONDS (0 turns it off), or narrow the statement (a WHERE clause, a LIMIT, a bound on a recursive CTE).",
                seconds(timeout_secs),
                elapsed.as_secs_f64()
            ),
        ),
        Stop::CtrlC => Error::new(
            ErrorCode::Limit,
            format!(
                "{INTERRUPTED}: the statement was stopped after {:.1} s; nothing was written. Repair: run it again, with a narrower statement or --max-rows if it was too slow or too long.",
                elapsed.as_secs_f64()
            ),
        )
        .caused_by(Cause::CtrlC),
    }
}

/// A failure of the database rather than of the statement (a damaged page, an I/O error, a
/// lock): reported as such, with its own repair, instead of blaming the SQL.
fn database_fault(e: rusqlite::Error) -> std::result::Result<Error, rusqlite::Error> {
    use rusqlite::ErrorCode as C;
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                C::DatabaseCorrupt
                    | C::NotADatabase
                    | C::SystemIoFailure
                    | C::CannotOpen
                    | C::DatabaseBusy
                    | C::DatabaseLocked
                    | C::DiskFull
                    | C::OutOfMemory
            ) =>
        {
            Ok(e.into())
        }
        _ => Err(e),
    }
}

fn to_json(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::from(i),
        ValueRef::Real(f) => Value::from(f),
        ValueRef::Text(t) => Value::from(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::from(String::from_utf8_lossy(b).into_owned()),
    }
}
