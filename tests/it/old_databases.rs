//! Databases made by released schemas, checked in as test data (`tests/data/v3.sqlite`, before
//! V4's usage accounting; `tests/data/v7.sqlite`, before V8's render cache and V9's event type),
//! opened by this build: the read-only commands work on them as they are, and the first writing
//! command migrates them with every row kept and the engine's invariants whole.
//!
//! The files were written by [`write_the_old_database_fixtures`] (ignored: run it only to make
//! them again), which runs refinery's own migrations up to that version and inserts rows with
//! that version's columns: /root/lead (the root session's manager) → /root/lead/docs (lead's
//! own serve) → /root/lead/docs/check (docs' own serve), /root/other beside lead, and a second
//! root session with /root/solo; in the V7 file also what each spent and a few events.

use crate::support::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

mod migrations {
    refinery::embed_migrations!("migrations");
}

fn fixture(version: u32) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/v{version}.sqlite"))
}

/// A copy of the fixture of `version` in a temporary folder (the checked-in file stays as it
/// is).
pub(crate) fn copy_of(version: u32) -> common::TempDb {
    let db = common::temp_db();
    std::fs::create_dir_all(db.path.parent().unwrap()).unwrap();
    std::fs::copy(fixture(version), &db.path).unwrap();
    db
}

fn text(o: &Output) -> String {
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_str(&text(o)).unwrap()
}

/// The schema version refinery recorded last.
fn version(db: &Path) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(
        "SELECT max(version) FROM refinery_schema_history",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

#[test]
fn a_v3_database_is_read_as_it_is_and_migrated_whole_by_restore() {
    let db = copy_of(3);
    assert_eq!(version(&db.path), 3);
    let tree = text(&common::threadbase(&db.path, &["tree"]));
    assert!(tree.contains("/root/lead/docs/check"), "{tree}");
    assert_eq!(version(&db.path), 3, "a read does not migrate");
    text(&common::threadbase(&db.path, &["restore"]));
    assert!(version(&db.path) >= 9);
    let usage = json(&common::threadbase(&db.path, &["usage", "--json"]));
    let trees = usage["trees"].as_array().unwrap();
    let root = trees
        .iter()
        .find(|t| t["rootSession"] == "ses_root")
        .unwrap();
    assert_eq!(root["threads"], 4, "{root}");
    assert_eq!(
        root["inputTokens"], 0,
        "what was spent before V4 is not known"
    );
    let out = common::threadbase(&db.path, &["check", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], true, "{v:#}");
}

#[test]
fn a_v7_database_keeps_its_spend_and_events_through_the_migration() {
    let db = copy_of(7);
    assert_eq!(version(&db.path), 7);
    let before = json(&common::threadbase(&db.path, &["usage", "--json"]));
    let events_before = text(&common::threadbase(&db.path, &["events", "/root/lead"]));
    assert!(
        events_before.contains("thread_started") && events_before.contains("thread_closed"),
        "{events_before}"
    );
    text(&common::threadbase(&db.path, &["restore"]));
    assert!(version(&db.path) >= 9);
    let after = json(&common::threadbase(&db.path, &["usage", "--json"]));
    assert_eq!(before, after);
    let root = after["trees"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["rootSession"] == "ses_root")
        .unwrap()
        .clone();
    assert_eq!(
        (&root["threads"], &root["inputTokens"]),
        (&4.into(), &1500.into())
    );
    assert_eq!(
        text(&common::threadbase(&db.path, &["events", "/root/lead"])),
        events_before
    );
    let out = common::threadbase(&db.path, &["check", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], true, "{v:#}");
}

/// Writes `tests/data/v3.sqlite` and `tests/data/v7.sqlite` again. Ignored: the checked-in
/// files are the test data; run with `cargo test --test it write_the_old_database_fixtures --
/// --ignored` only to make them anew (refinery stops at each version's migration).
#[test]
#[ignore]
fn write_the_old_database_fixtures() {
    for version in [3, 7] {
        let path = fixture(version);
        let _ = std::fs::remove_file(&path);
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        conn.pragma_update(None, "journal_mode", "DELETE").unwrap();
        migrations::migrations::runner()
            .set_target(refinery::Target::Version(version as i32))
            .run(&mut conn)
            .unwrap();
        let at = "2026-01-01T00:00:00.000Z";
        let managers = [
            (1, "ses_root", "/root", None),
            (2, "ses_lead", "/root/lead", Some(common::tid(1))),
            (3, "ses_docs", "/root/lead/docs", Some(common::tid(2))),
            (4, "ses_elsewhere", "/root", None),
        ];
        for (id, session, scope, self_id) in &managers {
            conn.execute(
                "INSERT INTO managers (id, session_id, contract, scope_path, depth, self_thread_id, created_at, updated_at) VALUES (?1, ?2, 'thread', ?3, 0, ?4, ?5, ?5)",
                rusqlite::params![id, session, scope, self_id, at],
            )
            .unwrap();
        }
        let threads = [
            (1, 1, "/root/lead", "/root", None),
            (2, 2, "/root/lead/docs", "/root/lead", Some(common::tid(1))),
            (
                3,
                3,
                "/root/lead/docs/check",
                "/root/lead/docs",
                Some(common::tid(2)),
            ),
            (4, 1, "/root/other", "/root", None),
            (9, 4, "/root/solo", "/root", None),
        ];
        for (n, manager, path, parent_path, parent_id) in &threads {
            let task = path.rsplit('/').next().unwrap();
            conn.execute(
                "INSERT INTO threads (id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd, status, phase, exit_kind, created_at, updated_at, last_event_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, '/tmp', 'closed', 'idle', 'exited', ?8, ?8, ?8)",
                rusqlite::params![common::tid(*n), manager, path, parent_path, parent_id, task, path.matches('/').count() as i64 - 1, at],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO thread_events (thread_id, seq, at, type, data) VALUES (?1, 1, ?2, 'thread_started', '{}'), (?1, 2, ?2, 'thread_closed', '{\"exit\":{\"kind\":\"exited\",\"code\":0,\"signal\":null}}')",
                rusqlite::params![common::tid(*n), at],
            )
            .unwrap();
            conn.execute(
                "UPDATE threads SET last_seq = 2 WHERE id = ?1",
                [common::tid(*n)],
            )
            .unwrap();
        }
        if version >= 4 {
            for (n, input) in [(1, 100), (2, 200), (3, 400), (4, 800), (9, 1)] {
                conn.execute(
                    "UPDATE thread_usage SET input_tokens = ?2, output_tokens = ?2 / 10, cost_usd = ?2 / 800.0, turns = 1, tool_calls = 1, updated_at = ?3 WHERE thread_id = ?1",
                    rusqlite::params![common::tid(n), input, at],
                )
                .unwrap();
            }
        }
        conn.execute_batch("VACUUM").unwrap();
    }
}
