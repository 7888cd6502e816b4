//! `threadbase sql`: ad-hoc read-only SQL. The file is opened read-only, the connection is
//! `query_only`, and a statement SQLite does not call read-only is refused before it runs.

use std::io::Write;
use std::path::Path;

use rusqlite::types::ValueRef;
use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::store::open_read_only;

pub fn run(db: &Path, query: &str, json: bool, out: &mut dyn Write) -> Result<()> {
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
    let failed = |e: rusqlite::Error| {
        database_fault(e).unwrap_or_else(|e| {
            Error::invalid(format!("The SQL failed: {e}. Repair: check the statement."))
        })
    };
    let mut rows = stmt.query([]).map_err(failed)?;
    let mut table: Vec<Vec<Value>> = Vec::new();
    while let Some(row) = rows.next().map_err(failed)? {
        let mut cells = Vec::with_capacity(names.len());
        for i in 0..names.len() {
            cells.push(to_json(row.get_ref(i)?));
        }
        table.push(cells);
    }
    if json {
        let objects: Vec<Value> = table
            .into_iter()
            .map(|cells| Value::Object(names.iter().cloned().zip(cells).collect::<Map<_, _>>()))
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&objects)?)?;
    } else {
        let text: Vec<Vec<String>> = table
            .iter()
            .map(|r| r.iter().map(cell_text).collect())
            .collect();
        write_table(out, &names, &text)?;
        writeln!(
            out,
            "({} row{})",
            text.len(),
            if text.len() == 1 { "" } else { "s" }
        )?;
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
