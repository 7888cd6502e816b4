//! Diagnostic logging through `tracing`. `THREADBASE_LOG` is the filter (`info`,
//! `threadbase=debug`, …); without it stderr shows warnings and errors only, so a healthy run
//! stays quiet. `serve --log-file` (or `THREADBASE_LOG_FILE`) adds a file, by default
//! `threadbase.log` beside the database, that records debug detail for a bug report.
//!
//! User-facing messages are not logging: errors with their `Repair:` hint and warnings about
//! ignored settings are written to stderr as they always were, whatever the filter.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::error::{Error, Result};

/// The filter variable (tracing-subscriber's `EnvFilter` syntax).
pub const LOG_ENV: &str = "THREADBASE_LOG";
/// The log file variable: a path, or `1`/`true`/`yes` for [`LOG_FILE_NAME`] beside the database.
pub const LOG_FILE_ENV: &str = "THREADBASE_LOG_FILE";
/// The default log file's name, beside the database.
pub const LOG_FILE_NAME: &str = "threadbase.log";
/// What stderr shows without `THREADBASE_LOG`.
const STDERR_DEFAULT: &str = "warn";
/// What the log file records without `THREADBASE_LOG`.
const FILE_DEFAULT: &str = "warn,threadbase=debug";

/// The log file `serve` writes, if any: `--log-file PATH`, `--log-file` alone (the default file
/// beside `db`; for a PostgreSQL database, in Pi's agent folder), else `$THREADBASE_LOG_FILE`. Absolute, so children inherit a usable path.
pub fn log_file(flag: Option<Option<PathBuf>>, env: Option<&str>, db: &Path) -> Option<PathBuf> {
    let beside_db = || super::beside_database(db, LOG_FILE_NAME);
    let chosen = match flag {
        Some(Some(path)) => path,
        Some(None) => beside_db(),
        None => match env.map(str::trim).filter(|v| !v.is_empty()) {
            None => return None,
            Some(v)
                if ["0", "false", "no"]
                    .iter()
                    .any(|f| v.eq_ignore_ascii_case(f)) =>
            {
                return None
            }
            Some(v)
                if ["1", "true", "yes"]
                    .iter()
                    .any(|t| v.eq_ignore_ascii_case(t)) =>
            {
                beside_db()
            }
            Some(v) => PathBuf::from(v),
        },
    };
    Some(std::path::absolute(&chosen).unwrap_or(chosen))
}

/// The filter from `THREADBASE_LOG`, else `default`. An invalid value is reported once (by the
/// caller that passes `warn: true`) and replaced by `default`.
fn filter(default: &str, warn: bool) -> EnvFilter {
    let Some(value) = std::env::var(LOG_ENV).ok().filter(|v| !v.trim().is_empty()) else {
        return EnvFilter::new(default);
    };
    match EnvFilter::builder().parse(&value) {
        Ok(f) => f,
        Err(e) => {
            if warn {
                eprintln!(
                    "threadbase: ignoring {LOG_ENV}={value:?} ({e}); using the default ({STDERR_DEFAULT} on stderr). Repair: set it to a level such as \"info\" or \"debug\", or to targets such as \"threadbase=debug\"."
                );
            }
            EnvFilter::new(default)
        }
    }
}

/// Installs the process's subscriber: stderr, plus `file` (appended, created with mode 0600)
/// when given. A second call changes nothing.
pub fn init(file: Option<&Path>) -> Result<()> {
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter(STDERR_DEFAULT, true));
    let file = match file {
        Some(path) => Some(
            tracing_subscriber::fmt::layer()
                .with_writer(Arc::new(open_log_file(path)?))
                .with_filter(filter(FILE_DEFAULT, false)),
        ),
        None => None,
    };
    let _ = tracing_subscriber::registry()
        .with(stderr)
        .with(file)
        .try_init();
    Ok(())
}

fn open_log_file(path: &Path) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let fail = |e: std::io::Error| {
        Error::io(format!(
            "Cannot open the log file {} ({e}). Repair: pass --log-file with a writable path (or --log-file alone for {LOG_FILE_NAME} beside the database), or unset {LOG_FILE_ENV}.",
            path.display()
        ))
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
        .map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_file_comes_from_the_flag_then_the_environment() {
        let db = Path::new("/data/agent/threadbase.sqlite");
        let beside = Some(PathBuf::from("/data/agent/threadbase.log"));
        assert_eq!(log_file(None, None, db), None);
        assert_eq!(log_file(None, Some(""), db), None);
        assert_eq!(log_file(None, Some("0"), db), None);
        assert_eq!(log_file(None, Some("false"), db), None);
        assert_eq!(log_file(Some(None), None, db), beside);
        assert_eq!(log_file(None, Some("1"), db), beside);
        assert_eq!(log_file(None, Some("TRUE"), db), beside);
        assert_eq!(
            log_file(None, Some("/tmp/x.log"), db),
            Some(PathBuf::from("/tmp/x.log"))
        );
        assert_eq!(
            log_file(Some(Some("/tmp/flag.log".into())), Some("/tmp/x.log"), db),
            Some(PathBuf::from("/tmp/flag.log"))
        );
        let relative = log_file(None, Some("logs/x.log"), db).unwrap();
        assert!(relative.is_absolute() && relative.ends_with("logs/x.log"));
        assert_eq!(
            log_file(Some(None), None, Path::new("db.sqlite")),
            Some(std::path::absolute("threadbase.log").unwrap())
        );
    }
}
