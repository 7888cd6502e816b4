//! `threadbase check`: a clean database passes; each invariant broken by raw SQL is reported
//! with its stable code and a repair; a live thread left by a dead owner is repaired by
//! `threadbase restore`; files that cannot be checked exit 2 with a `Repair:` hint.

use crate::support::common;

use std::path::Path;
use std::process::Command;

use common::{add, threadbase, tid};
use rusqlite::Connection;
use serde_json::Value;
use threadbase::domain::{SessionId, ThreadId};
use threadbase::runtime::signals::ProcessIdentity;
use threadbase::store::events::{self, NewEvent};
use threadbase::store::threads::{upsert_manager, Contract, ManagerSpec};
use threadbase::Store;

/// Runs `check --json`; returns the exit code and the document.
fn check(db: &Path) -> (i32, Value) {
    let out = threadbase(db, &["check", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check printed no JSON ({e}): {} / {stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (out.status.code().expect("exit code"), doc)
}

fn problems<'a>(doc: &'a Value, code: &str) -> Vec<&'a Value> {
    doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["check"] == code)
        .collect()
}

/// Asserts `doc` reports exactly the codes in `codes` (each at least once), every problem with a
/// message and a repair.
fn assert_codes(doc: &Value, codes: &[&str]) {
    let found: std::collections::BTreeSet<&str> = doc["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["check"].as_str().unwrap())
        .collect();
    let want: std::collections::BTreeSet<&str> = codes.iter().copied().collect();
    assert_eq!(found, want, "{doc:#}");
    for p in doc["problems"].as_array().unwrap() {
        assert!(!p["message"].as_str().unwrap().is_empty(), "{p}");
        assert!(!p["repair"].as_str().unwrap().is_empty(), "{p}");
        assert!(
            p["severity"] == "error" || p["severity"] == "warning",
            "{p}"
        );
    }
}

/// A clean database: a manager owned by this (live) test process, a closed parent with events,
/// its closed child (parent_id set), and a live thread this process owns.
fn clean() -> common::TempDb {
    let db = common::temp_db();
    let store = Store::open(&db.path).unwrap();
    let me = ProcessIdentity::current();
    let m = store
        .write(|tx| {
            upsert_manager(
                tx,
                &ManagerSpec {
                    cwd: Some("/tmp"),
                    owner_pid: Some(me.pid),
                    owner_started_at: Some(me.started_at),
                    ..common::manager_spec(
                        &SessionId::new("ses_check"),
                        Contract::Thread,
                        "/root",
                        None,
                    )
                },
            )
        })
        .unwrap();
    let mut child = common::thread(&tid(2), m, "/root/docs/review", false);
    child.parent_id = Some(tid(1).into());
    add(
        &store,
        &[
            common::thread(&tid(1), m, "/root/docs", false),
            child,
            common::thread(&tid(3), m, "/root/api_survey", true),
        ],
    );
    store
        .write(|tx| {
            tx.execute_script(&crate::support::sql::with(
                "UPDATE threads SET pid = ?1, pgid = ?1, owner_pid = ?1, owner_started_at = ?2 WHERE id = ?3",
                rusqlite::params![me.pid, me.started_at, tid(3)]))?;
            for (id, n) in [(tid(1), 3), (tid(3), 45)] {
                for i in 0..n {
                    let at = format!("2026-11-30T00:00:{:02}.{:03}Z", i / 10, i % 10);
                    events::append(
                        tx,
                        &ThreadId::new(&id),
                        &[NewEvent {
                            at: &at,
                            kind: "turn_started",
                            data: "{}",
                        }],
                    )?;
                }
            }
            Ok(())
        })
        .unwrap();
    db
}

/// Opens the file directly, as an outside tool would, with foreign keys off.
fn raw(db: &Path) -> Connection {
    let c = Connection::open(db).unwrap();
    c.execute_batch("PRAGMA foreign_keys = OFF; PRAGMA ignore_check_constraints = ON;")
        .unwrap();
    c
}

#[test]
fn a_clean_database_passes() {
    if crate::support::sql::sqlite_only("a_clean_database_passes", "writes a row with SQLite's strftime through a raw connection; every process test ends with `threadbase check` on PostgreSQL too (support::db_check)") {
        return;
    }
    let db = clean();
    let (code, doc) = check(&db.path);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["ok"], true);
    assert_codes(&doc, &[]);
    assert_eq!(doc["checked"]["threads"], 3);
    assert_eq!(doc["checked"]["events"], 3 + 40, "the ring keeps 40");
    assert_eq!(doc["checked"]["live_threads"], 1);
    // The library gives the same answer; the text form says ok.
    let report = threadbase::check::check_path(&db.path).unwrap();
    assert!(report.ok && report.problems.is_empty(), "{report:?}");
    let out = threadbase(&db.path, &["check"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ok: no problems found"), "{text}");
    // A reserved row whose launch is in flight (live, starting, no pid, just created, manager's
    // serve alive) is not a problem.
    raw(&db.path)
        .execute(
            "INSERT INTO threads (id, manager_id, path, parent_path, task_name, name, depth, cwd, status, phase, created_at, updated_at, last_event_at)
             SELECT 'thread_00000000fff1', id, '/root/launching', '/root', 'launching', 'launching', 1, '/tmp', 'live', 'starting', strftime('%Y-%m-%dT%H:%M:%fZ','now'), 'x', 'x' FROM managers",
            [],
        )
        .unwrap();
    let (code, doc) = check(&db.path);
    assert_eq!(code, 0, "{doc:#}");
    assert_codes(&doc, &[]);
    // Nor does another process's restore pass close it while its manager's serve lives.
    let out = threadbase(&db.path, &["restore", "--json"]);
    assert!(out.status.success());
    let restored: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(restored["restored"], serde_json::json!([]), "{restored}");
}

#[test]
fn a_demo_database_passes() {
    // The demo runs real serve processes, a nested serve (a thread that starts its own thread,
    // whose parent_id names a thread of the outer manager), stops, resumes and forks.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.sqlite");
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .args(["demo", "--keep"])
        .arg(&db)
        .env_remove("THREADBASE_DB")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, doc) = check(&db);
    assert_eq!(code, 0, "{doc:#}");
    assert_codes(&doc, &[]);
    assert!(doc["checked"]["threads"].as_i64().unwrap() >= 4, "{doc}");
}

/// Each case: SQL that breaks one invariant, the codes it must produce, the expected exit code.
#[test]
fn each_broken_invariant_is_reported_with_its_code_and_repair() {
    if crate::support::sql::sqlite_only("each_broken_invariant_is_reported_with_its_code_and_repair", "breaks constraints through a raw SQLite connection (foreign keys and CHECKs off, sqlite_schema edits)") {
        return;
    }
    let cases: &[(&str, &str, &[&str], i32)] = &[
        (
            "event of a missing thread",
            "INSERT INTO thread_events (thread_id, seq, at, type) VALUES ('thread_0000000dead1', 1, 'x', 'turn_started')",
            &["event_orphan"],
            1,
        ),
        (
            "mailbox row of a missing thread",
            "INSERT INTO mailbox (thread_id, direction, kind, body, created_at) VALUES ('thread_0000000dead2', 'to_child', 'prompt', 'hi', 'x')",
            &["foreign_key"],
            1,
        ),
        (
            "seq goes backwards in time",
            "INSERT INTO thread_events (thread_id, seq, at, type) VALUES ('thread_000000000001', 10, '2026-11-30T00:00:05.000Z', 'turn_started'), ('thread_000000000001', 11, '2026-11-30T00:00:04.000Z', 'turn_started'); UPDATE threads SET last_seq = 11 WHERE id = 'thread_000000000001'",
            &["event_seq_order"],
            1,
        ),
        (
            "last_seq behind the stored events",
            "UPDATE threads SET last_seq = 1 WHERE id = 'thread_000000000001'",
            &["last_seq_behind"],
            1,
        ),
        (
            "live, owner alive, no pid, not starting",
            "UPDATE threads SET pid = NULL, pgid = NULL WHERE id = 'thread_000000000003'",
            &["live_without_pid"],
            1,
        ),
        (
            "live, starting, no pid, created long ago",
            "UPDATE threads SET pid = NULL, pgid = NULL, phase = 'starting', created_at = '2026-01-01T00:00:00.000Z' WHERE id = 'thread_000000000003'",
            &["live_without_pid"],
            1,
        ),
        (
            "live, owner alive, its process gone",
            "UPDATE threads SET pid = 999999999, process_started_at = 1 WHERE id = 'thread_000000000003'",
            &["live_process_gone"],
            0,
        ),
        (
            "path is not parent_path/task_name",
            "UPDATE threads SET path = '/root/elsewhere' WHERE id = 'thread_000000000003'",
            &["path_mismatch"],
            1,
        ),
        (
            "parent_id names a missing thread",
            "UPDATE threads SET parent_id = 'thread_0000000dead3' WHERE id = 'thread_000000000002'",
            &["parent_mismatch", "foreign_key"],
            1,
        ),
        (
            "parent_id names a thread at another path",
            "UPDATE threads SET parent_id = 'thread_000000000003' WHERE id = 'thread_000000000002'",
            &["parent_mismatch"],
            1,
        ),
        (
            "parent_id names a thread of another manager",
            "INSERT INTO managers (session_id, contract, created_at, updated_at) VALUES ('ses_other', 'thread', 'x', 'x');
             INSERT INTO threads (id, manager_id, path, parent_path, task_name, name, depth, cwd, status, phase, exit_kind, created_at, updated_at, last_event_at)
             SELECT 'thread_00000000aaa1', id, '/root/docs', '/root', 'docs', 'docs', 1, '/tmp', 'closed', 'stale', 'stale', 'x', 'x', 'x' FROM managers WHERE session_id = 'ses_other';
             UPDATE threads SET parent_id = 'thread_00000000aaa1' WHERE id = 'thread_000000000002'",
            &["parent_mismatch"],
            1,
        ),
        (
            "a thread without its usage row",
            "DELETE FROM thread_usage WHERE thread_id = 'thread_000000000001'",
            &["usage_row_missing", "usage_total_mismatch"],
            1,
        ),
        (
            "a thread without its place in the tree",
            "DELETE FROM thread_places WHERE thread_id = 'thread_000000000002'",
            &["usage_row_missing", "usage_total_mismatch"],
            1,
        ),
        (
            "a tree total that is not the sum of its threads",
            "UPDATE thread_usage SET input_tokens = 7, cost_usd = 0.5 WHERE thread_id = 'thread_000000000001';
             UPDATE tree_usage SET input_tokens = input_tokens + 5",
            &["usage_total_mismatch"],
            1,
        ),
        (
            "closed without an exit kind",
            "UPDATE threads SET exit_kind = NULL WHERE id = 'thread_000000000001'",
            &["closed_without_exit"],
            1,
        ),
        (
            "pending report of a closed thread whose owners are gone",
            "UPDATE managers SET owner_pid = 999999999, owner_started_at = 1;
             INSERT INTO mailbox (thread_id, direction, kind, body, created_at) VALUES ('thread_000000000001', 'to_parent', 'report', 'done', 'x')",
            &["stale_mailbox"],
            0,
        ),
        (
            "pending command of a closed thread whose owners are gone",
            "UPDATE managers SET owner_pid = 999999999, owner_started_at = 1;
             INSERT INTO commands (thread_id, kind, created_at) VALUES ('thread_000000000001', 'stop', 'x')",
            &["stale_command"],
            0,
        ),
        (
            "an index that disagrees with its table",
            "PRAGMA writable_schema = ON;
             UPDATE sqlite_schema SET sql = 'CREATE INDEX threads_global_sort ON threads (path)' WHERE name = 'threads_global_sort';",
            &["integrity"],
            1,
        ),
    ];
    for (what, sql, codes, exit) in cases {
        let db = clean();
        raw(&db.path)
            .execute_batch(sql)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let (code, doc) = check(&db.path);
        println!("{what}: exit {code}, {}", doc["problems"]);
        assert_eq!(code, *exit, "{what}: {doc:#}");
        assert_eq!(doc["ok"], *exit == 0, "{what}");
        assert_codes(&doc, codes);
        // The text form names the code and a Repair for each problem.
        let out = threadbase(&db.path, &["check"]);
        let text = String::from_utf8_lossy(&out.stdout);
        for c in *codes {
            assert!(text.contains(&format!("[{c}]")), "{what}: {text}");
        }
        assert!(text.contains("Repair: "), "{text}");
    }
}

#[test]
fn two_threads_at_one_path_are_reported() {
    if crate::support::sql::sqlite_only(
        "two_threads_at_one_path_are_reported",
        "drops a UNIQUE constraint by editing sqlite_schema",
    ) {
        return;
    }
    // UNIQUE (manager_id, path) cannot be switched off; only an edited schema lets a duplicate in.
    let db = clean();
    raw(&db.path)
        .execute_batch(
            "PRAGMA writable_schema = ON;
             UPDATE sqlite_schema SET sql = replace(sql, 'UNIQUE (manager_id, path)', 'CHECK (1)') WHERE name = 'threads';
             DELETE FROM sqlite_schema WHERE name = 'sqlite_autoindex_threads_2';",
        )
        .unwrap();
    raw(&db.path)
        .execute(
            "INSERT INTO threads (id, manager_id, path, parent_path, task_name, name, depth, cwd, status, phase, exit_kind, created_at, updated_at, last_event_at)
             SELECT 'thread_00000000dup1', manager_id, path, parent_path, task_name, name, depth, cwd, 'closed', 'stale', 'stale', created_at, updated_at, last_event_at
             FROM threads WHERE id = ?1",
            [tid(1)],
        )
        .unwrap();
    let (code, doc) = check(&db.path);
    assert_eq!(code, 1, "{doc:#}");
    let dup = problems(&doc, "duplicate_path");
    assert_eq!(dup.len(), 1, "{doc:#}");
    let msg = dup[0]["message"].as_str().unwrap();
    assert!(
        msg.contains("/root/docs") && msg.contains("thread_00000000dup1"),
        "{msg}"
    );
}

#[test]
fn a_live_thread_of_a_dead_owner_is_repaired_by_restore() {
    let db = clean();
    // A real process that has exited: its pid and start time are an identity that is gone.
    let mut gone = Command::new("sleep").arg("0").spawn().unwrap();
    let pid = gone.id() as i64;
    let started = threadbase::runtime::signals::start_time(pid).unwrap_or(1);
    gone.wait().unwrap();
    crate::support::sql::Conn::open(&db.path)
        .unwrap()
        .execute(
            "UPDATE threads SET owner_pid = ?1, owner_started_at = ?2, pid = NULL, pgid = NULL WHERE id = ?3",
            rusqlite::params![pid, started, tid(3)],
        )
        .unwrap();
    let (code, doc) = check(&db.path);
    assert_eq!(code, 1, "{doc:#}");
    assert_codes(&doc, &["live_owner_gone"]);
    assert_eq!(
        problems(&doc, "live_owner_gone")[0]["repair"],
        "threadbase restore"
    );
    let out = threadbase(&db.path, &["restore"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, doc) = check(&db.path);
    assert_eq!(code, 0, "{doc:#}");
    assert_codes(&doc, &[]);
}

#[test]
fn files_that_cannot_be_checked_exit_2_with_a_repair() {
    let dir = tempfile::tempdir().unwrap();
    // Missing: not created.
    let missing = dir.path().join("missing.sqlite");
    let (code, doc) = check(&missing);
    assert_eq!(code, 2);
    assert_eq!(doc["ok"], false);
    assert!(doc["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Repair:"));
    assert!(!missing.exists(), "check never creates a database");
    let out = threadbase(&missing, &["check"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("No database at") && stderr.contains("Repair:"),
        "{stderr}"
    );
    // Not a database at all.
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello, this is not SQLite\n".repeat(100)).unwrap();
    let before = std::fs::read(&text).unwrap();
    let (code, doc) = check(&text);
    assert_eq!(code, 2, "{doc}");
    let msg = doc["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("not a SQLite database") && msg.contains("Repair:"),
        "{msg}"
    );
    assert_eq!(std::fs::read(&text).unwrap(), before, "unchanged");
    // A SQLite database that is not threadbase's.
    let other = dir.path().join("other.sqlite");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    let (code, doc) = check(&other);
    assert_eq!(code, 2);
    assert!(doc["error"]["message"]
        .as_str()
        .unwrap()
        .contains("not a threadbase database"));
    // A folder.
    let (code, _) = check(dir.path());
    assert_eq!(code, 2);
}
