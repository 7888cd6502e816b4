//! `threadbase sql` on PostgreSQL: one statement on a read-only connection, bounded by the
//! server's `statement_timeout`.

use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;

use crate::error::{Cause, Error, Result};
use crate::store::db::{Db, Value};

/// A statement's columns' names and its rows' values.
pub type Values = (Vec<String>, Vec<Vec<Value<'static>>>);

/// `threadbase sql`'s statement on PostgreSQL: the connection's transactions are read-only (a
/// statement that writes is refused by the server) and `timeout` (zero: none) is its
/// `statement_timeout`. Ctrl-C ends the process, and the server stops the statement with the
/// connection. `Ok(Err(elapsed))`: the server stopped the statement at its timeout.
pub fn query(
    url: &str,
    query: &str,
    timeout: Duration,
) -> Result<std::result::Result<Values, Duration>> {
    let (conn, _, _) = super::store::open_read_only(url, timeout)?;
    let started = Instant::now();
    match Db::query_values(&conn, query) {
        Ok(values) => Ok(Ok(values)),
        Err(e) => {
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
            Err(match code {
                Some(c) if c == SqlState::READ_ONLY_SQL_TRANSACTION => Error::forbidden(
                    "threadbase sql is read-only: this statement would change the database and was refused; nothing was written. Repair: use SELECT; changes go through threadbase serve.",
                ),
                Some(c) if c == SqlState::QUERY_CANCELED => return Ok(Err(started.elapsed())),
                Some(_) => Error::invalid(format!(
                    "The SQL failed: PostgreSQL error: {detail}. Repair: pass exactly one valid SELECT statement; list tables with \"SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()\"."
                )),
                None => e,
            })
        }
    }
}
