//! Database consistency after a run: `PRAGMA integrity_check`, `PRAGMA foreign_key_check`, the
//! invariants written out as SQL here, and `threadbase check`. The SQL is an independent oracle:
//! a bug in `threadbase check` that hides a problem does not hide it here too.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use threadbase::store::db::Value;

fn pid_alive(pid: i64) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Runs every check; `Err` lists the problems found.
pub fn db_check(db: &Path) -> Result<String, String> {
    let mut problems = Vec::new();
    // SQLite's own checks of its file; a PostgreSQL server keeps its pages and foreign keys.
    if super::database_is_sqlite(db) {
        let conn = rusqlite::Connection::open(db).map_err(|e| e.to_string())?;
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        let integrity: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| e.to_string())?;
        if integrity != "ok" {
            problems.push(format!("integrity_check: {integrity}"));
        }
        let fk: i64 = conn
            .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
                r.get(0)
            })
            .unwrap();
        if fk != 0 {
            problems.push(format!("{fk} foreign key violations"));
        }
    }
    let count = |sql: &str| -> i64 { super::sql::count(db, sql) };
    for (what, sql) in [
        (
            "events of missing threads",
            "SELECT count(*) FROM thread_events e WHERE NOT EXISTS (SELECT 1 FROM threads t WHERE t.id = e.thread_id)",
        ),
        (
            "threads whose events pass last_seq",
            "SELECT count(*) FROM threads t WHERE (SELECT max(seq) FROM thread_events e WHERE e.thread_id = t.id) > t.last_seq",
        ),
        (
            "threads retaining more than 40 events",
            "SELECT count(*) FROM (SELECT thread_id FROM thread_events GROUP BY thread_id HAVING count(*) > 40) AS x",
        ),
        (
            "duplicate (manager, path)",
            "SELECT count(*) FROM (SELECT 1 FROM threads GROUP BY manager_id, path HAVING count(*) > 1) AS x",
        ),
        (
            "live threads without a pid",
            "SELECT count(*) FROM threads WHERE status = 'live' AND pid IS NULL",
        ),
        (
            "closed threads without an exit",
            "SELECT count(*) FROM threads WHERE status = 'closed' AND exit_kind IS NULL",
        ),
    ] {
        let n = count(sql);
        if n != 0 {
            problems.push(format!("{n} {what}"));
        }
    }
    let owners: Vec<(String, i64)> = super::sql::values(
        db,
        "SELECT id, owner_pid FROM threads WHERE status = 'live' AND owner_pid IS NOT NULL",
    )
    .into_iter()
    .map(|r| match (&r[0], &r[1]) {
        (Value::Text(id), Value::Int(pid)) => (id.to_string(), *pid),
        other => panic!("a live thread's id and owner: {other:?}"),
    })
    .collect();
    for (id, owner) in owners {
        if !pid_alive(owner) {
            problems.push(format!("live thread {id} with dead owner {owner}"));
        }
    }

    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(db)
        .args(["check", "--json"])
        .output()
        .expect("run threadbase");
    if !out.status.success() {
        problems.push(format!(
            "threadbase check exited {:?}: {}{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if problems.is_empty() {
        Ok("sql + threadbase check".to_string())
    } else {
        Err(problems.join("; "))
    }
}
