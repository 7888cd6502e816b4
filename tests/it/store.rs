//! The store on real database files: opening, migrations, constraints, events, resolution,
//! list filters.

use crate::support::common;
#[allow(unused_imports)]
use crate::support::sql::Rusqlite as _;

use common::{add, manager, temp_db, thread, tid};
use rusqlite::Connection;
use threadbase::domain::ThreadId;
use threadbase::store::events::{self, NewEvent};
use threadbase::store::list::{list, ListQuery, StateFilter, Subtree, VisibilityFilter};
use threadbase::store::refs::{resolve, resolve_list_filter, RefScope};
use threadbase::{ErrorCode, Store};

#[test]
fn open_creates_folders_sets_wal_and_is_idempotent() {
    if crate::support::sql::sqlite_only(
        "open_creates_folders_sets_wal_and_is_idempotent",
        "the file, its folders and WAL mode",
    ) {
        return;
    }
    let db = temp_db();
    assert!(!db.path.parent().unwrap().exists());
    let store = Store::open(&db.path).unwrap();
    let conn = store.read().unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", (), |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let fk: i64 = conn
        .query_row("PRAGMA foreign_keys", (), |r| r.get(0))
        .unwrap();
    assert_eq!(fk, 1);
    let sync: i64 = conn
        .query_row("PRAGMA synchronous", (), |r| r.get(0))
        .unwrap();
    assert_eq!(sync, 1, "NORMAL");
    drop(conn);
    drop(store);
    // A second open runs no migration again and keeps the data.
    let store = Store::open(&db.path).unwrap();
    let applied: i64 = store
        .read()
        .unwrap()
        .query_row("SELECT count(*) FROM refinery_schema_history", (), |r| {
            r.get(0)
        })
        .unwrap();
    assert!(applied >= 1);
}

#[test]
fn an_edited_applied_migration_fails_loudly() {
    if crate::support::sql::sqlite_only(
        "an_edited_applied_migration_fails_loudly",
        "SQLite's migrations/ history in the file; postgres::migrate covers PostgreSQL's",
    ) {
        return;
    }
    let db = temp_db();
    drop(Store::open(&db.path).unwrap());
    // Pretend the applied V1 had different text: its checksum no longer matches the file.
    let conn = Connection::open(&db.path).unwrap();
    conn.execute(
        "UPDATE refinery_schema_history SET checksum = '1' WHERE version = 1",
        (),
    )
    .unwrap();
    drop(conn);
    let err = Store::open(&db.path)
        .err()
        .expect("divergent migration must fail");
    assert_eq!(err.code, ErrorCode::Internal);
    assert!(err.message.contains("migration"), "{}", err.message);
    assert!(err.message.contains("Repair:"), "{}", err.message);
}

#[test]
fn readers_cannot_write() {
    let db = temp_db();
    let store = Store::open(&db.path).unwrap();
    let conn = store.read().unwrap();
    let err = conn
        .execute_script(&crate::support::sql::with("DELETE FROM threads", ()))
        .unwrap_err();
    assert!(
        err.to_string().contains("readonly") || err.to_string().contains("read-only"),
        "{err}"
    );
}

#[test]
fn constraints_enforce_the_rules() {
    let db = temp_db();
    let store = Store::open(&db.path).unwrap();
    let m = manager(&store, "ses_a");
    add(&store, &[thread(&tid(1), m, "/root/a", true)]);

    // UNIQUE (manager, path).
    let dup = store.write(|tx| {
        threadbase::store::threads::insert_thread(tx, &thread(&tid(2), m, "/root/a", true))
    });
    assert_eq!(dup.unwrap_err().code, ErrorCode::Conflict);
    // The same path under another manager is fine.
    let m2 = manager(&store, "ses_b");
    add(&store, &[thread(&tid(3), m2, "/root/a", true)]);

    let conn = crate::support::sql::Conn::open(&db.path).unwrap();
    let bad = |sql: &str| conn.execute_batch(sql).expect_err(sql);
    // CHECK on enums and on the path/parent relation.
    bad("UPDATE threads SET status = 'zombie' WHERE id = 'thread_000000000001'");
    bad("UPDATE threads SET phase = 'sleeping' WHERE id = 'thread_000000000001'");
    bad("UPDATE threads SET status = 'closed' WHERE id = 'thread_000000000001'"); // closed needs an exit
    bad("UPDATE threads SET task_name = 'b' WHERE id = 'thread_000000000001'");
    bad("UPDATE threads SET pgid = 1 WHERE id = 'thread_000000000001'"); // never a pgid <= 1
                                                                         // Mailbox: UNIQUE (thread, send key).
    conn.execute_batch(
        "INSERT INTO mailbox (thread_id, direction, kind, send_key, body, created_at)
         VALUES ('thread_000000000001', 'to_child', 'prompt', 'k1', 'hello', 'now')",
    )
    .unwrap();
    bad(
        "INSERT INTO mailbox (thread_id, direction, kind, send_key, body, created_at)
         VALUES ('thread_000000000001', 'to_child', 'prompt', 'k1', 'again', 'now')",
    );
    // Reports: one per worker, verdict CHECK, non-empty summary, evidence array.
    conn.execute_batch(
        "INSERT INTO reports (worker_id, verdict, summary, evidence, message_id, created_at)
         VALUES ('thread_000000000001', 'PASS', 'ok', '[\"cargo test\"]', 'm1', 'now')",
    )
    .unwrap();
    bad(
        "INSERT INTO reports (worker_id, verdict, summary, evidence, message_id, created_at)
         VALUES ('thread_000000000001', 'PASS', 'ok', '[]', 'm2', 'now')",
    );
    bad(
        "INSERT INTO reports (worker_id, verdict, summary, evidence, message_id, created_at)
         VALUES ('thread_000000000003', 'MAYBE', 'ok', '[]', 'm2', 'now')",
    );
    bad(
        "INSERT INTO reports (worker_id, verdict, summary, evidence, message_id, created_at)
         VALUES ('thread_000000000003', 'FAIL', '  ', '[]', 'm2', 'now')",
    );
    bad(
        "INSERT INTO reports (worker_id, verdict, summary, evidence, message_id, created_at)
         VALUES ('thread_000000000003', 'FAIL', 'x', '{}', 'm2', 'now')",
    );
    // Foreign keys: an event for a missing thread.
    bad("INSERT INTO thread_events (thread_id, seq, at, type) VALUES ('thread_ffffffffffff', 1, 'now', 'turn_started')");
}

#[test]
fn a_failed_write_leaves_nothing_behind() {
    let db = temp_db();
    let store = Store::open(&db.path).unwrap();
    let m = manager(&store, "ses_a");
    let result = store.write(|tx| {
        threadbase::store::threads::insert_thread(tx, &thread(&tid(1), m, "/root/a", true))?;
        threadbase::store::threads::insert_thread(tx, &thread(&tid(2), m, "/root/a", true))
    });
    assert!(result.is_err());
    let n: i64 = store
        .read()
        .unwrap()
        .query_row("SELECT count(*) FROM threads", (), |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0, "the transaction rolled back whole");
}

#[test]
fn events_keep_a_ring_of_40_and_seq_grows_across_reopen() {
    let db = temp_db();
    {
        let store = Store::open(&db.path).unwrap();
        let m = manager(&store, "ses_a");
        add(&store, &[thread(&tid(1), m, "/root/a", true)]);
        for batch in 0..5 {
            store
                .write(|tx| {
                    let data = format!("{{\"batch\":{batch}}}");
                    let evs: Vec<NewEvent> = (0..13)
                        .map(|_| NewEvent {
                            at: "2026-01-01T00:00:00.000Z",
                            kind: "turn_started",
                            data: &data,
                        })
                        .collect();
                    events::append(tx, &ThreadId::new(tid(1)), &evs)
                })
                .unwrap();
        }
    }
    let store = Store::open(&db.path).unwrap();
    let conn = store.read().unwrap();
    let evs = events::of_thread(&conn, &ThreadId::new(tid(1))).unwrap();
    assert_eq!(evs.len(), 40);
    assert_eq!(evs.first().unwrap().seq, 26);
    assert_eq!(evs.last().unwrap().seq, 65);
    assert!(evs.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    drop(conn);
    let next = store
        .write(|tx| {
            events::append(
                tx,
                &ThreadId::new(tid(1)),
                &[NewEvent {
                    at: "2026-01-01T00:00:01.000Z",
                    kind: "turn_completed",
                    data: "{}",
                }],
            )
        })
        .unwrap();
    assert_eq!(next, 66);
    let last_event_at: String = store
        .read()
        .unwrap()
        .query_row("SELECT last_event_at FROM threads", (), |r| r.get(0))
        .unwrap();
    assert_eq!(last_event_at, "2026-01-01T00:00:01.000Z");
    // A batch longer than the ring keeps only its newest 40.
    let evs: Vec<NewEvent> = (0..100)
        .map(|_| NewEvent {
            at: "t",
            kind: "tool_started",
            data: "{}",
        })
        .collect();
    let last = store
        .write(|tx| events::append(tx, &ThreadId::new(tid(1)), &evs))
        .unwrap();
    let kept = events::of_thread(&store.read().unwrap(), &ThreadId::new(tid(1))).unwrap();
    assert_eq!((kept.len(), kept[0].seq, last), (40, 127, 166));
}

fn seeded() -> (common::TempDb, Store, threadbase::domain::ManagerId) {
    let db = temp_db();
    let store = Store::open(&db.path).unwrap();
    let m = manager(&store, "ses_a");
    add(
        &store,
        &[
            thread(&tid(1), m, "/root/alpha", true),
            thread(&tid(2), m, "/root/alpha/review", false),
            thread(&tid(3), m, "/root/beta", true),
            thread(&tid(4), m, "/root/beta/review", true),
            thread(&tid(5), m, "/root/beta/lint", false),
            thread(&tid(6), m, "/root/alpha_b", true),
            thread(&tid(7), m, "/root/alpha1", true),
        ],
    );
    store
        .write(|tx| {
            tx.execute_script(&crate::support::sql::with(
                "UPDATE threads SET archived = 1 WHERE id = ?1",
                [tid(5)],
            ))
        })
        .unwrap();
    (db, store, m)
}

#[test]
fn resolution_follows_contract_a_order() {
    let (_db, store, m) = seeded();
    let conn = store.read().unwrap();
    let root = RefScope {
        manager_id: m,
        current_path: "/root",
        self_id: None,
    };
    let path_of = |scope, r: &str| resolve(&conn, scope, r).map(|t| t.path);
    assert_eq!(path_of(root, &tid(3)).unwrap(), "/root/beta");
    assert_eq!(path_of(root, "/root/beta/lint").unwrap(), "/root/beta/lint");
    assert_eq!(path_of(root, "root/beta").unwrap(), "/root/beta");
    assert_eq!(path_of(root, "beta/lint").unwrap(), "/root/beta/lint");
    assert_eq!(
        path_of(root, "  lint ").unwrap(),
        "/root/beta/lint",
        "trimmed; unique task name"
    );
    // Relative to a nested current path.
    let in_beta = RefScope {
        manager_id: m,
        current_path: "/root/beta",
        self_id: None,
    };
    assert_eq!(path_of(in_beta, "review").unwrap(), "/root/beta/review");
    // From /root, "review" is not a path and matches two task names.
    let err = resolve(&conn, root, "review").unwrap_err();
    assert_eq!(err.code, ErrorCode::AmbiguousReference);
    assert_eq!(
        err.message,
        "Ambiguous thread reference \"review\". Candidate paths: /root/alpha/review, /root/beta/review. Repair: use one of the candidate paths or a thread id instead."
    );
    // An id-shaped text never falls through to names.
    let err = resolve(&conn, root, "thread_0000000000ff").unwrap_err();
    assert_eq!(err.code, ErrorCode::UnknownReference);
    assert!(err.message.starts_with("Unknown thread reference: \"thread_0000000000ff\". Accepted reference forms: thread id (thread_012345abcdef), canonical path (/root/task), relative path from the current thread (task or parent/task), or unambiguous taskName. Known threads: /root/alpha (id: thread_000000000001, taskName: alpha); /root/alpha_b"));
    assert!(err.message.ends_with(
        "Repair: use a known path/id, run { \"action\": \"list\" }, or start the thread first."
    ));
    // Another manager's threads are invisible; an empty manager says so.
    let empty = manager(&store, "ses_empty");
    let err = resolve(
        &conn,
        RefScope {
            manager_id: empty,
            current_path: "/root",
            self_id: None,
        },
        "alpha",
    )
    .unwrap_err();
    assert!(
        err.message
            .contains("No threads are currently managed by this parent."),
        "{}",
        err.message
    );
}

#[test]
fn list_filters_are_sql() {
    let (_db, store, m) = seeded();
    let conn = store.read().unwrap();
    let paths = |q: ListQuery| {
        list(&conn, m, &q)
            .unwrap()
            .threads
            .into_iter()
            .map(|t| t.path)
            .collect::<Vec<_>>()
    };
    // Default: all states, active only, localeCompare order ('_' < '/' < digits < letters).
    assert_eq!(
        paths(ListQuery::default()),
        [
            "/root/alpha",
            "/root/alpha_b",
            "/root/alpha/review",
            "/root/alpha1",
            "/root/beta",
            "/root/beta/review"
        ]
    );
    let q = ListQuery {
        state: StateFilter::Live,
        ..Default::default()
    };
    assert_eq!(
        paths(q),
        [
            "/root/alpha",
            "/root/alpha_b",
            "/root/alpha1",
            "/root/beta",
            "/root/beta/review"
        ]
    );
    let q = ListQuery {
        visibility: VisibilityFilter::Archived,
        ..Default::default()
    };
    assert_eq!(paths(q), ["/root/beta/lint"]);
    let q = ListQuery {
        subtree: Subtree::ChildrenOf("/root".into()),
        visibility: VisibilityFilter::All,
        ..Default::default()
    };
    assert_eq!(
        paths(q),
        ["/root/alpha", "/root/alpha_b", "/root/alpha1", "/root/beta"]
    );
    let q = ListQuery {
        subtree: Subtree::DescendantsOf("/root/alpha".into()),
        ..Default::default()
    };
    assert_eq!(
        paths(q),
        ["/root/alpha/review"],
        "whole segments only: alpha_b and alpha1 are not below alpha"
    );
    let q = ListQuery {
        subtree: Subtree::DescendantsOf("/root/beta".into()),
        state: StateFilter::Closed,
        visibility: VisibilityFilter::All,
    };
    let listing = list(&conn, m, &q).unwrap();
    assert_eq!(
        (listing.count, listing.live_count, listing.closed_count),
        (1, 0, 1)
    );
    // Filter references: '.', 'self', a valid path nobody has, a name.
    let self_id = ThreadId::new("thread_00000000abcd");
    let scope = RefScope {
        manager_id: m,
        current_path: "/root/beta",
        self_id: Some(&self_id),
    };
    assert_eq!(
        resolve_list_filter(&conn, scope, ".").unwrap(),
        "/root/beta"
    );
    assert_eq!(
        resolve_list_filter(&conn, scope, "self").unwrap(),
        "/root/beta"
    );
    assert_eq!(
        resolve_list_filter(&conn, scope, "thread_00000000abcd").unwrap(),
        "/root/beta"
    );
    assert_eq!(
        resolve_list_filter(&conn, scope, "/root/nobody/here").unwrap(),
        "/root/nobody/here"
    );
    assert_eq!(
        resolve_list_filter(&conn, scope, "lint").unwrap(),
        "/root/beta/lint"
    );
    assert_eq!(
        resolve_list_filter(&conn, scope, &tid(1)).unwrap(),
        "/root/alpha"
    );
    assert!(
        threadbase::store::list::exclusive_filters(Some("a"), Some("b"))
            .unwrap_err()
            .message
            .contains("mutually exclusive")
    );
}

/// Found by tests/it/crash_serve.rs (through `threadbase check`): a child's event read just
/// before a stop request was committed after the stop's `thread_stopping`, so a higher seq
/// carried an earlier time. Appended events never go back in time now.
#[test]
fn appended_events_never_go_back_in_time() {
    let db = temp_db();
    let store = Store::open(&db.path).unwrap();
    let m = manager(&store, "ses_a");
    add(&store, &[thread(&tid(1), m, "/root/a", true)]);
    let append = |at: &'static str, kind: &'static str| {
        store
            .write(|tx| {
                events::append(
                    tx,
                    &ThreadId::new(tid(1)),
                    &[NewEvent {
                        at,
                        kind,
                        data: "{}",
                    }],
                )
            })
            .unwrap()
    };
    append("2026-01-01T00:00:00.305Z", "thread_stopping");
    append("2026-01-01T00:00:00.304Z", "tool_completed");
    append("2026-01-01T00:00:00.306Z", "thread_closed");
    let conn = store.read().unwrap();
    let ats: Vec<(i64, String)> = events::of_thread(&conn, &ThreadId::new(tid(1)))
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.at))
        .collect();
    assert_eq!(
        ats,
        [
            (1, "2026-01-01T00:00:00.305Z".to_string()),
            (2, "2026-01-01T00:00:00.305Z".to_string()),
            (3, "2026-01-01T00:00:00.306Z".to_string()),
        ]
    );
    let last: String = conn
        .query_row("SELECT last_event_at FROM threads", (), |r| r.get(0))
        .unwrap();
    assert_eq!(last, "2026-01-01T00:00:00.306Z");
}

fn wal_len(path: &std::path::Path) -> u64 {
    std::fs::metadata(format!("{}-wal", path.display())).map_or(0, |m| m.len())
}

/// A store that closes leaves every row in the database file (the WAL emptied), even while
/// another connection stays open and idle; a connection that stays in the middle of a read
/// makes the settling give up after a short bounded wait (250 ms: a brief read of a
/// background task or another process ends within it), and the WAL stays for whoever closes
/// last.
#[test]
fn a_closed_store_leaves_its_rows_in_the_main_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sqlite");
    let idle = Store::open(&path).unwrap();
    let store = Store::open(&path).unwrap();
    store
        .write(|tx| {
            tx.execute_batch("CREATE TABLE scratch(x); INSERT INTO scratch VALUES (1), (2), (3);")?;
            Ok(())
        })
        .unwrap();
    assert!(wal_len(&path) > 0);
    let reader = threadbase::store::open_read_only(&path).unwrap();
    reader.execute_batch("BEGIN").unwrap();
    let _: i64 = reader
        .query_row("SELECT count(*) FROM scratch", (), |r| r.get(0))
        .unwrap();
    let began = std::time::Instant::now();
    assert!(!store.settle_wal(), "settled under an open read");
    assert!(
        began.elapsed() < std::time::Duration::from_millis(1_000),
        "it waited past its bound"
    );
    assert!(wal_len(&path) > 0);
    reader.execute_batch("COMMIT").unwrap();
    drop(store);
    assert_eq!(wal_len(&path), 0, "the WAL was not emptied");
    // The main file alone holds the rows.
    let copy = dir.path().join("copy.sqlite");
    std::fs::copy(&path, &copy).unwrap();
    let n: i64 = Connection::open(&copy)
        .unwrap()
        .query_row("SELECT count(*) FROM scratch", (), |r| r.get(0))
        .unwrap();
    assert_eq!(n, 3);
    drop(idle);
}

/// Every query of `sql/` that holds rows' placeholders prepares against the schema the
/// migrations build, and returns those rows' columns and no other (its select list is the
/// placeholders, one after another: a query that selected more or fewer would be read at the
/// wrong positions).
#[test]
fn every_row_query_returns_its_rows_columns() {
    if crate::support::sql::sqlite_only(
        "every_row_query_returns_its_rows_columns",
        "prepares each query on SQLite; postgres::queries compares them on PostgreSQL",
    ) {
        return;
    }
    let db = common::temp_db();
    let store = threadbase::Store::open(&db.path).unwrap();
    let conn = store.read().unwrap();
    let mut seen = 0;
    for (path, text) in sql_files() {
        let rows: Vec<_> = common::ROWS
            .iter()
            .filter(|(placeholder, _, _)| text.contains(placeholder))
            .collect();
        if rows.is_empty() {
            continue;
        }
        let stmt = conn
            .sqlite()
            .unwrap()
            .prepare(&common::expand_rows(&text))
            .unwrap();
        let count: usize = rows.iter().map(|(_, _, count)| count).sum();
        assert_eq!(stmt.column_count(), count, "{path:?}");
        seen += 1;
    }
    assert!(seen >= 24, "only {seen} row queries found");
}

/// The tests know every row: each placeholder a query of `sql/` writes and each row the store
/// declares (`columns!` in `src/store/`) is in `store::ROWS` (the tests' `common::ROWS`, which
/// the test above and every test's expansion read), once, and each declared row is returned by
/// some query.
#[test]
fn every_row_declaration_and_placeholder_is_listed() {
    let known: Vec<&str> = common::ROWS.iter().map(|(p, _, _)| *p).collect();
    let mut unique = known.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), known.len(), "a placeholder is listed twice");
    let mut used = std::collections::HashSet::new();
    for (path, text) in sql_files() {
        for placeholder in placeholders(&text) {
            assert!(
                known.contains(&placeholder.as_str()),
                "{path:?} writes {placeholder}, which no row of store::ROWS (store/rows.rs) names"
            );
            used.insert(placeholder);
        }
    }
    for p in &known {
        assert!(used.contains(*p), "no query of sql/ returns the row {p}");
    }
    let mut declared = 0;
    let mut folders = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store")];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            // rows.rs declares the macro (and a demo row for its own test).
            if path.extension().is_none_or(|e| e != "rs") || path.ends_with("rows.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for line in text
                .lines()
                .filter(|l| l.contains(" mod ") && l.contains(" as \"{"))
            {
                let placeholder = line.split('"').nth(1).unwrap();
                assert!(
                    known.contains(&placeholder),
                    "{path:?} declares the row {placeholder}, which store::ROWS (store/rows.rs) does not list"
                );
                declared += 1;
            }
        }
    }
    assert_eq!(
        declared,
        known.len(),
        "store::ROWS (store/rows.rs) lists a row no module declares"
    );
}

/// Every file of `sql/`: its path and text.
fn sql_files() -> Vec<(std::path::PathBuf, String)> {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        // sql/postgres/ holds PostgreSQL's overrides (tests/it/postgres/queries.rs checks them).
        .filter(|path| path.is_file())
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            (path, text)
        })
        .collect()
}

/// The placeholders (`{name}`, a name of lowercase letters and `_`) in a query's text.
fn placeholders(text: &str) -> Vec<String> {
    text.split('{')
        .skip(1)
        .filter_map(|rest| {
            let name = rest.split_once('}')?.0;
            (!name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
                .then(|| format!("{{{name}}}"))
        })
        .collect()
}
