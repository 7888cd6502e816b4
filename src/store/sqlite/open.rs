//! Opening a database file: the embedded migrations (refinery) and the check that a file is
//! already up to date, the read-only open of the CLI's reads, and the errors that say what is
//! wrong with a path (a folder, not a threadbase file, none there yet) and how to repair it.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

use super::BUSY_TIMEOUT;
use crate::error::{Error, Result};
use crate::store::{migration_col, rows};

pub(in crate::store) mod embedded {
    refinery::embed_migrations!("migrations");
    // `MIGRATIONS`, the same files as (version, name, sql): see build.rs.
    include!(concat!(env!("OUT_DIR"), "/migrations.rs"));
}

/// Names the database in an I/O error that does not name it yet (a corrupt page found while
/// migrating, a full disk while registering the manager), so the message says which file.
pub fn name_database(path: &Path, e: Error) -> Error {
    if e.code != crate::error::ErrorCode::Io || e.names_database() {
        return e;
    }
    let message = format!("Database {}: {}", path.display(), e.message);
    e.with_message(message).naming_database()
}

pub(in crate::store) fn open_error(path: &Path, e: rusqlite::Error) -> Error {
    let base: Error = e.into();
    let message = format!(
        "Cannot open the database {}: {}",
        path.display(),
        base.message
    );
    base.with_code(crate::error::ErrorCode::Io)
        .with_message(message)
        .naming_database()
}

/// The refusal of a writable database whose folder lets no new file be made (a read-only or
/// immutable folder): SQLite's WAL mode keeps two files beside the database, which it must be
/// able to create. `None` when a file can be made there (the failure was something else).
pub(in crate::store) fn folder_refusal(path: &Path) -> Option<Error> {
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let why = tempfile::tempfile_in(folder).err()?;
    Some(
        Error::io(format!(
            "Cannot use the database {}: its folder {} lets no new file be made ({why}), and SQLite must create the database's -wal and -shm files there (the write-ahead log, which holds the latest writes, and the readers' shared memory). Repair: make the folder writable (`chattr -i` if it is immutable, a read-write mount if it is mounted read-only), or move the database into a writable folder and pass --db with its new path.",
            path.display(),
            folder.display()
        ))
        .naming_database(),
    )
}

/// A read-only open that fails because the folder is not writable: reading a WAL database
/// needs its `-shm` file, which SQLite creates beside the database.
pub(in crate::store) fn read_open_error(path: &Path, e: rusqlite::Error) -> Error {
    let cant_open = matches!(&e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::CannotOpen);
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if cant_open {
        if let Err(why) = rustix::fs::access(folder, rustix::fs::Access::WRITE_OK) {
            return Error::io(format!(
                "Cannot read the database {}: its folder {} is not writable ({why}), and SQLite must create the -shm file there to read a WAL database. Repair: copy the database (and its -wal file, if any) to a writable folder and pass --db with the copy, or make the folder writable.",
                path.display(),
                folder.display()
            ))
            .naming_database();
        }
    }
    open_error(path, e)
}

/// Switches to WAL and runs pending migrations. A file lock beside the database serialises
/// processes that open a new file at the same moment; refinery refuses an applied migration
/// whose text changed.
pub(in crate::store) fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    if up_to_date(conn) {
        return Ok(());
    }
    let lock_path = {
        let mut p = path.as_os_str().to_owned();
        p.push(".migrate-lock");
        PathBuf::from(p)
    };
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).map_err(|e| {
        // The lock file's name starts with the database's.
        Error::io(format!(
            "Cannot lock {}: {e}. Repair: check folder permissions.",
            lock_path.display()
        ))
        .naming_database()
    })?;
    // The switch to WAL is under the lock too: on a new file it rewrites the header, and a
    // second process doing the same at that moment got `database is locked` without waiting.
    let result = (|| {
        // Checked again under the lock: another process may have just migrated it.
        if up_to_date(conn) {
            return Ok(());
        }
        let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::io(format!(
                "The database {} could not switch to WAL mode (journal_mode is {mode}). Repair: put the database on a local filesystem that supports shared memory.",
                path.display()
            ))
            .naming_database());
        }
        embedded::migrations::runner()
            .set_abort_divergent(true)
            .set_abort_missing(true)
            .run(conn)?;
        Ok(())
    })();
    drop(lock);
    result
}

/// Whether the database at `conn` is in WAL mode and has exactly this build's migrations
/// applied, each with the checksum refinery recorded for it: then there is nothing for
/// refinery's runner to do. The check exists for serve's start (the `extension/first_call` row
/// of `benches/serve.rs`): building the runner compiles refinery's migration-name regex,
/// about 2 ms of a start that the Pi extension's first tool call waits for. Anything else (a
/// new file, an older or newer history, a checksum that differs) goes to the runner, which
/// migrates or refuses as before.
pub(in crate::store) fn up_to_date(conn: &Connection) -> bool {
    let wal = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0))
        .is_ok_and(|mode| mode.eq_ignore_ascii_case("wal"));
    if !wal {
        return false;
    }
    let applied = conn
        .prepare(rows::row_sql!("migrations_applied", migration_col))
        .and_then(|mut stmt| {
            stmt.query_map([], |r| {
                Ok((
                    r.get::<_, i64>(migration_col::VERSION)?,
                    r.get::<_, String>(migration_col::NAME)?,
                    r.get::<_, String>(migration_col::CHECKSUM)?,
                ))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()
        });
    let Ok(applied) = applied else {
        return false;
    };
    applied.len() == embedded::MIGRATIONS.len()
        && applied.iter().zip(embedded::MIGRATIONS).all(
            |((version, name, checksum), &(v, n, sql))| {
                *version == i64::from(v)
                    && name == n
                    && *checksum == migration_checksum(v, n, sql).to_string()
            },
        )
}

/// The checksum refinery records for a migration (`refinery_core::Migration::unapplied`):
/// SipHash-1-3 of its name, version and text, in that order.
pub(in crate::store) fn migration_checksum(version: i32, name: &str, sql: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = siphasher::sip::SipHasher13::new();
    name.hash(&mut h);
    version.hash(&mut h);
    sql.hash(&mut h);
    h.finish()
}

/// Opens the file at `path` for ad-hoc reading only: the file is opened read-only and the
/// connection is `query_only`, so no statement can change it.
pub fn open_read_only(path: &Path) -> Result<Connection> {
    if !path.exists() {
        return Err(no_database(path));
    }
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| read_open_error(path, e))?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.execute_batch("PRAGMA query_only = ON;")
        .map_err(|e| read_open_error(path, e))?;
    // SQLite reads the header and the schema lazily; read them now so a file that is not a
    // database (or whose first page is damaged) fails here, naming the file, and not inside
    // whatever query runs first; and so an empty file or another program's database is named
    // as such, not found wanting a table later.
    let holds = holds(&conn).map_err(|e| read_open_error(path, e))?;
    if holds != Holds::Threadbase {
        return Err(not_threadbase(path, &holds));
    }
    Ok(conn)
}

/// What a SQLite database holds, as far as threadbase is concerned.
#[derive(Debug, PartialEq, Eq)]
pub(in crate::store) enum Holds {
    /// No table at all: a new or empty file.
    Nothing,
    /// threadbase's tables (the history of its migrations, or its `threads` table).
    Threadbase,
    /// Tables, none of them threadbase's: another program's database (their names).
    Other(Vec<String>),
}

pub(in crate::store) fn holds(conn: &Connection) -> rusqlite::Result<Holds> {
    let mut stmt = conn.prepare(include_str!("../../../sql/schema_tables.sql"))?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(if names.is_empty() {
        Holds::Nothing
    } else if names
        .iter()
        .any(|n| n == "threads" || n == "refinery_schema_history")
    {
        Holds::Threadbase
    } else {
        Holds::Other(names)
    })
}

/// The refusal of a file that holds no threadbase database (`holds` is not `Threadbase`).
pub(in crate::store) fn not_threadbase(path: &Path, holds: &Holds) -> Error {
    let message = match holds {
        Holds::Other(names) => {
            let shown: Vec<&str> = names.iter().take(5).map(String::as_str).collect();
            let more = if names.len() > shown.len() { ", …" } else { "" };
            format!(
                "{} is a SQLite database but not a threadbase database (its tables: {}{more}); nothing in it was read or changed. Repair: pass --db or set THREADBASE_DB to a threadbase database file, or a new path for serve to create one.",
                path.display(),
                shown.join(", ")
            )
        }
        _ => format!(
            "{} is an empty database: threadbase never wrote to it, so it holds no threads; nothing in it was changed. Repair: pass --db or set THREADBASE_DB to the threadbase database you mean. {}",
            path.display(),
            HOW_ONE_IS_MADE
        ),
    };
    Error::io(message).naming_database()
}

/// How a threadbase database comes to exist, for the errors about a missing or empty one.
const HOW_ONE_IS_MADE: &str = "`threadbase serve` creates one (the Pi extension starts it at a session's first `thread` tool call, at $THREADBASE_DB or $PI_CODING_AGENT_DIR/threadbase.sqlite), and `threadbase demo --keep FILE` writes one with example rows to FILE.";

/// The refusal of a command that reads or changes an existing database when there is no file.
pub fn no_database(path: &Path) -> Error {
    Error::io(format!(
        "No database at {}. Repair: pass --db or set THREADBASE_DB to the threadbase database you mean. {HOW_ONE_IS_MADE}",
        path.display()
    ))
    .naming_database()
}
