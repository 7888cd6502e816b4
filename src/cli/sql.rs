//! `threadbase sql`: ad-hoc read-only SQL. The file is opened read-only, the connection is
//! `query_only`, and a statement SQLite does not call read-only is refused before it runs.
//!
//! A statement is bounded: a watchdog thread interrupts it (`sqlite3_interrupt`) when `--timeout`
//! passes or on Ctrl-C, so a runaway query (a recursive CTE without a limit) ends with a message
//! instead of running until the process is killed. `--max-rows` caps the printed rows. The
//! statement runs in `store::adhoc`; this module words and prints what it read.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::Result;
use crate::store::adhoc::{self, seconds, Stop};

/// The default `--timeout`, in seconds.
pub const DEFAULT_TIMEOUT_SECS: f64 = 30.0;

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

/// `threadbase sql`: runs `query` within `bounds` and prints the rows (a table, or `--json`).
pub fn run(db: &Path, query: &str, json: bool, bounds: &Bounds, out: &mut dyn Write) -> Result<()> {
    let adhoc::Table {
        names,
        rows: table,
        left_out,
        counting_stopped,
    } = adhoc::query(
        db,
        query,
        bounds.timeout_secs,
        bounds.ctrl_c,
        bounds.max_rows,
    )?;
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
