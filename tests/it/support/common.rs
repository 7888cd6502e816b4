//! Shared helpers for integration tests: temporary database files and seeded trees.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

use threadbase::domain::{ManagerId, Phase, SessionId, ThreadId, ThreadStatus};
use threadbase::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec, NewThread};
use threadbase::Store;

/// A temporary folder that holds one database file; on a PostgreSQL run
/// (`THREADBASE_TEST_BACKEND=postgres`), `path` is instead the URL of a fresh schema, dropped
/// with the value.
pub struct TempDb {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
    /// Held for its drop (the schema goes with the value).
    #[allow(dead_code)]
    pub schema: Option<super::postgres::TestSchema>,
}

pub fn temp_db() -> TempDb {
    let dir = tempfile::tempdir().expect("tempdir");
    let schema = super::postgres::schema_for_run("temp_db");
    let path = match &schema {
        Some(s) => PathBuf::from(s.database_url()),
        None => dir.path().join("nested").join("threadbase.sqlite"),
    };
    TempDb { dir, path, schema }
}

/// A contract A manager of `session` at `/root`, cwd `/tmp`, owned by this process.
pub fn manager(store: &Store, session: &str) -> ManagerId {
    let session = SessionId::new(session);
    let spec = ManagerSpec {
        cwd: Some("/tmp"),
        owner_pid: Some(std::process::id() as i64),
        ..manager_spec(&session, Contract::Thread, "/root", None)
    };
    store
        .write(|tx| upsert_manager(tx, &spec))
        .expect("manager")
}

/// A manager of `session` (its contract, scope and self thread) at depth 0, with no session
/// file, cwd or owner: change what a test needs with `..manager_spec(…)`.
pub fn manager_spec<'a>(
    session: &'a SessionId,
    contract: Contract,
    scope: &'a str,
    self_id: Option<&'a ThreadId>,
) -> ManagerSpec<'a> {
    ManagerSpec {
        self_thread_id: self_id,
        ..ManagerSpec::new(session, contract, scope)
    }
}

/// A contract A thread row at `path` (whose parent row, if any, must exist for parent_id).
pub fn thread(id: &str, manager_id: ManagerId, path: &str, live: bool) -> NewThread {
    let parent = threadbase::paths::parent_path(path).map(str::to_string);
    let task = threadbase::paths::basename(path).to_string();
    NewThread {
        id: ThreadId::new(id),
        manager_id,
        path: path.to_string(),
        parent_path: parent,
        parent_id: None,
        name: task.replace('_', " "),
        task_name: task,
        depth: threadbase::paths::segment_count(path) as i64 - 1,
        cwd: "/tmp".into(),
        args: vec![],
        status: if live {
            ThreadStatus::Live
        } else {
            ThreadStatus::Closed
        },
        phase: if live { Phase::Idle } else { Phase::Stale },
        ..Default::default()
    }
}

/// Inserts threads in one transaction. Closed ones get a stale exit.
pub fn add(store: &Store, rows: &[NewThread]) {
    store
        .write(|tx| {
            for t in rows {
                if t.status == ThreadStatus::Closed {
                    let mut live = t.clone();
                    live.status = ThreadStatus::Live;
                    insert_thread(tx, &live)?;
                    tx.execute_script(&format!(
                        "UPDATE threads SET status='closed', phase='stale', exit_kind='stale', exit_message='seeded' WHERE id={}",
                        super::sql::lit(t.id.as_str())
                    ))?;
                } else {
                    insert_thread(tx, t)?;
                }
            }
            Ok(())
        })
        .expect("seed threads");
}

/// A deterministic contract A id for test number `n`.
pub fn tid(n: u64) -> String {
    format!("thread_{n:012x}")
}

/// `threadbase --db <db> <args>` without `THREADBASE_DB` from the test's environment.
pub fn threadbase(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("THREADBASE_DB")
        .output()
        .expect("run threadbase")
}

/// The number `sql` reads (its first column of its one row) from the database `db` (a file
/// or a PostgreSQL URL).
pub fn count(db: &Path, sql: &str) -> i64 {
    super::sql::count(db, sql)
}

/// The two columns of every row `sql` reads.
pub fn pairs<A: threadbase::store::db::FromCell, B: threadbase::store::db::FromCell>(
    conn: &super::sql::Conn,
    sql: &str,
) -> Vec<(A, B)> {
    conn.prepare(sql)
        .unwrap()
        .query_map((), |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// The keys of the JSON object `v`, in its order.
pub fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

/// The keys of a contract C worker view (`threads_spawn`, `threads_list`, the HTTP snapshot),
/// in the contract's order.
pub const WORKER_VIEW_KEYS: [&str; 10] = [
    "workerID",
    "coordinatorID",
    "key",
    "title",
    "directory",
    "agent",
    "model",
    "outcome",
    "report",
    "hidden",
];

/// What a test does when something it needs from outside (real Pi, Chromium, a PostgreSQL
/// server) is missing: under `CI=true` it fails, naming `what` and `why`; elsewhere it prints
/// `SKIPPED <test>: <why>` and the test returns.
pub fn required_or_skip(test: &str, what: &str, why: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: {what} is required under CI=true: {why}");
    }
    eprintln!("SKIPPED {test}: {why}");
}

/// Calls `probe` every `every` until it gives a value, for at most `timeout`; then fails with
/// `what`.
pub fn poll<T>(
    timeout: Duration,
    every: Duration,
    what: &str,
    mut probe: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(every);
    }
}

/// Each row declaration of the store (`columns!`): its placeholder, select list and column
/// count (`threadbase::store::ROWS`). `tests/it/store.rs` fails when a declaration or a
/// placeholder of `sql/` is missing from it.
pub const ROWS: &[(&str, &str, usize)] = threadbase::store::ROWS;

/// The text of a query of `sql/` with every row placeholder (`{thread_row}`, …) replaced by its
/// select list, as the store expands it (`row_sql!`).
pub fn expand_rows(sql: &str) -> String {
    ROWS.iter()
        .fold(sql.to_owned(), |sql, (placeholder, select, _)| {
            sql.replace(placeholder, select)
        })
}

/// Runs git in `dir` with a fixed author and committer (the tests' repositories); its stdout.
/// It must succeed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
