//! SQLite's errors as the engine's [`Error`]: each SQLite failure (busy, read-only, full
//! disk, not a database, damaged, a constraint, an I/O failure) gets its code and a message with
//! its `Repair:` hint, and keeps the SQLite error as its cause; so do the pool's and the
//! migrations' errors (refinery's, which PostgreSQL's runner shares). Nothing outside `store`
//! sees those types.

use crate::error::{Cause, Error};

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        let error = from_sqlite(&e);
        error.caused_by(Cause::Database(std::sync::Arc::new(e)))
    }
}

/// Whether `cause` is SQLite's refusal of a duplicate key (a unique index or a primary key).
pub fn is_unique_violation(cause: &(dyn std::error::Error + Send + Sync + 'static)) -> bool {
    matches!(cause.downcast_ref::<rusqlite::Error>(), Some(rusqlite::Error::SqliteFailure(f, _))
    if matches!(
        f.extended_code,
        rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
    ))
}

/// The error a query that must return a row gives when it returns none (SQLite's own, as
/// `query_row` gives it, so callers that tell "no row" apart keep working on either backend).
pub fn no_row() -> Error {
    rusqlite::Error::QueryReturnedNoRows.into()
}

/// The code and message of a SQLite error (its cause is added by the `From` impl).
fn from_sqlite(e: &rusqlite::Error) -> Error {
    use rusqlite::ErrorCode as C;
    if let rusqlite::Error::SqliteFailure(f, msg) = e {
        let detail = msg.clone().unwrap_or_else(|| f.to_string());
        return match f.code {
                C::DatabaseBusy | C::DatabaseLocked => Error::io(format!(
                    "The database stayed busy past the busy timeout ({detail}). Repair: retry; if it persists, find the process holding a long write transaction."
                )),
                C::ReadOnly => Error::io(format!(
                    "The database is read-only ({detail}). Repair: make the database file and its folder writable, or point --db at a writable path."
                )),
                C::DiskFull => Error::io(format!(
                    "The disk is full ({detail}). Repair: free space on the database's filesystem; nothing was written."
                )),
                C::CannotOpen => Error::io(format!(
                    "Cannot open the database ({detail}). Repair: check that the folder exists and is writable, or pass --db."
                )),
                C::NotADatabase => Error::io(format!(
                    "The file is not a SQLite database, or its first page is damaged ({detail}); no threadbase command can read it, `threadbase check` included. Repair: check that --db (or THREADBASE_DB) names the right file; if it is a damaged threadbase database, stop every threadbase process using it, move it aside (keep it: `sqlite3 FILE .recover > rows.sql` may save its rows) and start with a new file, or restore a backup."
                )),
                C::DatabaseCorrupt => Error::io(format!(
                    "The database file is damaged ({detail}). Repair: run `threadbase check` on it (SQLite's integrity check names the damaged tables and indexes); then stop every threadbase process using it, move it aside (keep it: `sqlite3 FILE .recover > rows.sql` may save its rows) and start with a new file, or restore a backup."
                )),
                C::ConstraintViolation => Error::conflict(format!(
                    "A database constraint refused the change ({detail}). Repair: re-read the current state and retry with values that do not collide."
                )),
                C::SystemIoFailure => {
                    use rusqlite::ffi;
                    let what = match f.extended_code {
                        ffi::SQLITE_IOERR_WRITE => "a write failed (a full disk, a file-size limit such as `ulimit -f`, or a failing device)",
                        ffi::SQLITE_IOERR_READ | ffi::SQLITE_IOERR_SHORT_READ => "a read failed (a damaged, truncated or vanished file)",
                        ffi::SQLITE_IOERR_FSYNC | ffi::SQLITE_IOERR_DIR_FSYNC => "syncing to disk failed",
                        ffi::SQLITE_IOERR_SHMOPEN | ffi::SQLITE_IOERR_SHMSIZE | ffi::SQLITE_IOERR_SHMMAP => "the -shm file could not be used (a full or read-only folder)",
                        _ => "an I/O operation failed",
                    };
                    Error::io(format!(
                        "The database could not be read or written: {what} ({detail}). Repair: check free space, file-size limits and the filesystem, then retry; the failed request wrote nothing."
                    ))
                }
                _ => Error::internal(format!(
                    "SQLite error: {detail}. Repair: retry; if it persists, run `threadbase check` on the database."
                )),
            };
    }
    Error::internal(format!(
        "SQLite error: {e}. Repair: retry; if it persists, run `threadbase check` on the database."
    ))
}

impl From<r2d2::Error> for Error {
    fn from(e: r2d2::Error) -> Self {
        Error::io(format!(
            "Could not get a database connection: {e}. Repair: check that the database file is readable."
        ))
    }
}

impl From<refinery::Error> for Error {
    fn from(e: refinery::Error) -> Self {
        Error::internal(format!(
            "Database migration failed: {e}. Repair: an applied migration must never be edited; restore the original file under migrations/ or use a new database."
        ))
    }
}
