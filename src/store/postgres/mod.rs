//! The PostgreSQL backend (issue 32), beside the SQLite store: its connections ([`conn`], their
//! sockets driven by the calling thread through [`direct`]), the store over them ([`store`]: a
//! writer whose writes take the advisory lock of what their rules protect, and a pool of readers), its schema history and the runner that
//! applies it under an advisory lock ([`migrate`]), the rewrite of a query's SQLite parameters
//! to PostgreSQL's `$N` ([`params`]), and the PostgreSQL text of every query of `sql/`
//! ([`queries`]: the file itself where it is portable, `sql/postgres/NAME.sql` where it cannot
//! be).

pub mod adhoc;
pub mod conn;
pub mod direct;
pub mod migrate;
pub mod params;
pub mod queries;
pub mod store;

use crate::error::{Cause, Error};

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Self {
        let error = match e.as_db_error() {
            // Class 23: integrity constraint violation (unique, foreign key, check, not null).
            Some(db) if db.code().code().starts_with("23") => Error::conflict(format!(
                "A database constraint refused the change ({} ({})). Repair: re-read the current state and retry with values that do not collide.",
                db.message(),
                db.code().code()
            )),
            Some(db) => Error::io(format!(
                "PostgreSQL error: {} ({}). Repair: retry; if it persists, check the server's log.",
                db.message(),
                db.code().code()
            )),
            None => Error::io(format!(
                "PostgreSQL error: {e}. Repair: check that the server is up and the URL's host, port, database and user are right, then retry."
            )),
        };
        error.caused_by(Cause::Database(std::sync::Arc::new(e)))
    }
}

/// Whether `cause` is PostgreSQL's refusal of a duplicate key (`store::is_unique_violation`).
pub fn is_unique_violation(cause: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    cause
        .downcast_ref::<tokio_postgres::Error>()
        .is_some_and(|pg| pg.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION))
}

/// Whether `cause` says the server could not be reached (`store::is_connection_lost`).
pub fn is_connection_lost(cause: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    cause
        .downcast_ref::<tokio_postgres::Error>()
        .is_some_and(|pg| match pg.code() {
            // No SQLSTATE: the socket failed or closed.
            None => true,
            // 08: connection exceptions; 57P: the server shutting down, crashed or
            // still starting up (57P03 while it replays its WAL after a restart).
            Some(code) => {
                pg.is_closed() || code.code().starts_with("08") || code.code().starts_with("57P")
            }
        })
}
