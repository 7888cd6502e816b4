//! `threadbase sql`: ad-hoc read-only SQL. The file is opened read-only, the connection is
//! `query_only`, and a statement SQLite does not call read-only is refused before it runs.
//!
//! A statement is bounded: a watchdog thread interrupts it (`sqlite3_interrupt`) when `--timeout`
//! passes or on Ctrl-C, so a runaway query (a recursive CTE without a limit) ends with a message
//! instead of running until the process is killed. `--max-rows` caps the printed rows.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rusqlite::types::ValueRef;
use serde_json::{Map, Value};

use crate::error::{Cause, Error, ErrorCode, Result};
use crate::store::open_read_only;

/// The default `--timeout`, in seconds.
pub const DEFAULT_TIMEOUT_SECS: f64 = 30.0;

/// The start of the message of a statement stopped by Ctrl-C (its cause is `Cause::CtrlC`;
/// the CLI exits 130 on it, as a command stopped by SIGINT does).
pub const INTERRUPTED: &str = "Interrupted (Ctrl-C)";

/// What bounds one statement.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Stop the statement after this many seconds (`None` or 0: no bound).
    pub timeout_secs: Option<f64>,
    /// Print at most this many rows (the rest are counted and reported).
    pub max_rows: Option<usize>,
    /// Interrupt the statement on Ctrl-C (the command line; not the demo).
    pub ctrl_c: bool,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            timeout_secs: Some(DEFAULT_TIMEOUT_SECS),
            max_rows: None,
            ctrl_c: false,
        }
    }
}

/// Parses `--timeout SECONDS`: a non-negative number, 0 for no bound.
pub fn parse_timeout(raw: &str) -> std::result::Result<f64, String> {
    match raw.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 && Duration::try_from_secs_f64(s).is_ok() => Ok(s),
        _ => Err(format!(
            "{raw:?} is not a number of seconds. Repair: pass --timeout with a number such as 30 or 0.5 (0 turns the bound off)"
        )),
    }
}

/// Why the watchdog stopped a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
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

fn seconds(s: f64) -> String {
    format!("{s} s")
}

/// The error for a statement the watchdog stopped after `elapsed`.
fn stopped(stop: Stop, bounds: &Bounds, elapsed: Duration) -> Error {
    match stop {
        Stop::Timeout => Error::new(
            ErrorCode::Limit,
            format!(
                "The statement ran longer than --timeout {} and was stopped (after {:.1} s); nothing was written. Repair: raise the bound with --timeout SECONDS (0 turns it off), or narrow the statement (a WHERE clause, a LIMIT, a bound on a recursive CTE).",
                seconds(bounds.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS)),
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

/// `threadbase sql`: runs `query` within `bounds` and prints the rows (a table, or `--json`).
pub fn run(db: &Path, query: &str, json: bool, bounds: &Bounds, out: &mut dyn Write) -> Result<()> {
    let conn = open_read_only(db)?;
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
    let timeout = bounds
        .timeout_secs
        .filter(|s| *s > 0.0)
        .map(Duration::from_secs_f64);
    let started = Instant::now();
    let watchdog = Watchdog::arm(&conn, timeout, bounds.ctrl_c);
    let failed = |e: rusqlite::Error| {
        if let Some(stop) = watchdog.fired() {
            return stopped(stop, bounds, started.elapsed());
        }
        database_fault(e).unwrap_or_else(|e| {
            Error::invalid(format!("The SQL failed: {e}. Repair: check the statement."))
        })
    };
    let mut rows = stmt.query([]).map_err(failed)?;
    let mut table: Vec<Vec<Value>> = Vec::new();
    // Rows past --max-rows are counted, not kept; a stop while counting makes it a lower bound.
    let mut left_out: u64 = 0;
    let mut counting_stopped: Option<Stop> = None;
    loop {
        let row = match rows.next() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            Err(e) if left_out > 0 || bounds.max_rows.is_some_and(|m| table.len() >= m) => {
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
        if bounds.max_rows.is_some_and(|m| table.len() >= m) {
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
    let left_out_note = (left_out > 0 || counting_stopped.is_some()).then(|| {
        let max = bounds.max_rows.unwrap_or(0);
        match counting_stopped {
            None => format!(
                "{left_out} more row{} left out by --max-rows {max}",
                if left_out == 1 { "" } else { "s" }
            ),
            Some(stop) => format!(
                "at least {left_out} more row{} left out by --max-rows {max}; counting them stopped at {}",
                if left_out == 1 { "" } else { "s" },
                match stop {
                    Stop::Timeout => format!(
                        "--timeout {}",
                        seconds(bounds.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS))
                    ),
                    Stop::CtrlC => "Ctrl-C".to_string(),
                }
            ),
        }
    });
    if json {
        let objects: Vec<Value> = table
            .into_iter()
            .map(|cells| Value::Object(names.iter().cloned().zip(cells).collect::<Map<_, _>>()))
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&objects)?)?;
        if let Some(note) = &left_out_note {
            // stdout stays one JSON document.
            eprintln!("threadbase sql: {note}. Repair: raise --max-rows to see them.");
        }
    } else {
        let text: Vec<Vec<String>> = table
            .iter()
            .map(|r| r.iter().map(cell_text).collect())
            .collect();
        write_table(out, &names, &text)?;
        let n = text.len();
        let plural = if n == 1 { "" } else { "s" };
        match &left_out_note {
            None => writeln!(out, "({n} row{plural})")?,
            Some(note) => writeln!(out, "({n} row{plural} shown; {note})")?,
        }
    }
    Ok(())
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

fn cell_text(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        Value::String(s) => s.replace('\n', "\\n"),
        other => other.to_string(),
    }
}

/// Writes rows as a table with aligned columns (widths in chars).
pub(crate) fn write_table(
    out: &mut dyn Write,
    header: &[String],
    rows: &[Vec<String>],
) -> Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| -> String {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(cell);
                s.extend(std::iter::repeat_n(' ', w - cell.chars().count() + 2));
            }
        }
        s.trim_end().to_string()
    };
    writeln!(out, "{}", line(header))?;
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    writeln!(out, "{}", line(&rule))?;
    for row in rows {
        writeln!(out, "{}", line(row))?;
    }
    Ok(())
}
