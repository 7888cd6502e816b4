//! Two processes writing one database at the same time never see `database is locked`.
//!
//! The test re-executes its own binary: `writer_process` does the work only when
//! THREADBASE_TEST_WRITER is set.

use crate::support::common;
#[allow(unused_imports)]
use crate::support::sql::Rusqlite as _;

use std::process::Command;

use threadbase::domain::ThreadId;
use threadbase::store::events::{self, NewEvent};
use threadbase::store::threads::insert_thread;
use threadbase::Store;

const ROUNDS: usize = 300;

#[test]
fn writer_process() {
    let Ok(spec) = std::env::var("THREADBASE_TEST_WRITER") else {
        return;
    };
    let (db, who) = spec.split_once('|').expect("db|who");
    let store = Store::open(db).expect("open");
    let m = common::manager(&store, &format!("ses_{who}"));
    for i in 0..ROUNDS {
        store
            .write(|tx| {
                let id = format!("thread_{who}{i:011x}");
                insert_thread(tx, &common::thread(&id, m, &format!("/root/t{i}"), true))?;
                events::append(
                    tx,
                    &ThreadId::new(&id),
                    &[NewEvent {
                        at: "t",
                        kind: "thread_started",
                        data: "{}",
                    }],
                )?;
                Ok(())
            })
            .unwrap_or_else(|e| panic!("writer {who} round {i}: {e}"));
        // Readers run between writes, as a serve's poll would.
        let n: i64 = store
            .read()
            .unwrap()
            .query_row("SELECT count(*) FROM threads", (), |r| r.get(0))
            .unwrap();
        assert!(n > i as i64);
    }
}

/// Opens (creating and migrating) the database named by THREADBASE_TEST_OPENER, once.
#[test]
fn opener_process() {
    let Ok(db) = std::env::var("THREADBASE_TEST_OPENER") else {
        return;
    };
    Store::open(&db).unwrap_or_else(|e| panic!("open: {e}"));
}

#[test]
fn many_processes_create_one_new_database_at_once() {
    if crate::support::sql::sqlite_only("many_processes_create_one_new_database_at_once", "creating one SQLite file from many processes; postgres::migrate covers concurrent migrations") {
        return;
    }
    // A race on a new file (two processes switching it to WAL together) failed about one
    // open in sixty with `database is locked`; eight openers over thirty files make it show.
    let exe = std::env::current_exe().unwrap();
    for round in 0..30 {
        let db = common::temp_db();
        let openers: Vec<_> = (0..8)
            .map(|_| {
                Command::new(&exe)
                    .args([
                        "--exact",
                        "concurrency::opener_process",
                        "--nocapture",
                        "--test-threads=1",
                    ])
                    .env("THREADBASE_TEST_OPENER", &db.path)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("spawn opener")
            })
            .collect();
        for opener in openers {
            let out = opener.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let version: i64 = Store::open(&db.path)
            .unwrap()
            .read()
            .unwrap()
            .query_row(
                "SELECT max(version) FROM refinery_schema_history",
                (),
                |r| r.get(0),
            )
            .unwrap();
        assert!(version >= 2, "round {round}: migrated once, to the latest");
    }
}

#[test]
fn two_processes_write_concurrently_without_locked_errors() {
    let db = common::temp_db();
    // Both processes race to create and migrate the file too.
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = ["a", "b"]
        .iter()
        .map(|who| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "concurrency::writer_process",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(
                    "THREADBASE_TEST_WRITER",
                    format!("{}|{who}", db.path.display()),
                )
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn writer")
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "writer failed: {text}");
        assert!(!text.contains("locked") && !text.contains("busy"), "{text}");
    }
    let store = Store::open(&db.path).unwrap();
    let conn = store.read().unwrap();
    let threads: i64 = conn
        .query_row("SELECT count(*) FROM threads", (), |r| r.get(0))
        .unwrap();
    let evs: i64 = conn
        .query_row("SELECT count(*) FROM thread_events", (), |r| r.get(0))
        .unwrap();
    assert_eq!(
        (threads, evs),
        (2 * ROUNDS as i64, 2 * ROUNDS as i64),
        "no row lost"
    );
}
