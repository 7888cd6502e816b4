//! `threadbase sql` on PostgreSQL: one statement on a read-only connection, bounded by the
//! server's `statement_timeout`.

use std::time::{Duration, Instant};

use serde_json::Value;
use tokio_postgres::error::SqlState;

use crate::error::{Cause, Error, Result};
use crate::store::adhoc::{stopped, Stop, Table};
use crate::store::db::{Db, Value as V};

/// [`query`](crate::store::adhoc::query) on PostgreSQL: the connection's transactions are read-only (a statement that
/// writes is refused by the server) and `timeout_secs` is its `statement_timeout`. Ctrl-C ends
/// the process, and the server stops the statement with the connection.
pub fn query(
    url: &str,
    query: &str,
    timeout_secs: Option<f64>,
    max_rows: Option<usize>,
) -> Result<Table> {
    let timeout = timeout_secs
        .filter(|s| *s > 0.0)
        .map(Duration::from_secs_f64)
        .unwrap_or(Duration::ZERO);
    let (conn, _, _) = super::store::open_read_only(url, timeout)?;
    let started = Instant::now();
    let (names, rows) = Db::query_values(&conn, query).map_err(|e| {
        let pg = match e.cause() {
            Some(Cause::Database(c)) => c.downcast_ref::<tokio_postgres::Error>(),
            _ => None,
        };
        let code = pg.and_then(|pg| pg.code().cloned());
        // The server's own words, without the generic error's `Repair:` (this one has its own).
        let detail = pg
            .and_then(|pg| pg.as_db_error())
            .map(|db| format!("{} ({})", db.message(), db.code().code()))
            .unwrap_or_else(|| e.message.clone());
        match code {
            Some(c) if c == SqlState::READ_ONLY_SQL_TRANSACTION => Error::forbidden(
                "threadbase sql is read-only: this statement would change the database and was refused; nothing was written. Repair: use SELECT; changes go through threadbase serve.",
            ),
            Some(c) if c == SqlState::QUERY_CANCELED => {
                stopped(Stop::Timeout, timeout_secs.unwrap_or(0.0), started.elapsed())
            }
            Some(_) => Error::invalid(format!(
                "The SQL failed: PostgreSQL error: {detail}. Repair: pass exactly one valid SELECT statement; list tables with \"SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()\"."
            )),
            None => e,
        }
    })?;
    let keep = max_rows.unwrap_or(usize::MAX);
    let left_out = rows.len().saturating_sub(keep) as u64;
    let rows = rows
        .into_iter()
        .take(keep)
        .map(|r| {
            r.into_iter()
                .map(|v| match v {
                    V::Null => Value::Null,
                    V::Int(i) => Value::from(i),
                    V::Real(f) => Value::from(f),
                    V::Text(t) => Value::from(t.into_owned()),
                    V::Blob(b) => Value::from(String::from_utf8_lossy(&b).into_owned()),
                })
                .collect()
        })
        .collect();
    Ok(Table {
        names,
        rows,
        left_out,
        counting_stopped: None,
    })
}
