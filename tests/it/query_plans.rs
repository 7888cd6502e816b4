//! The hot queries are index lookups or range scans, never a scan of the manager's threads:
//! checked with EXPLAIN QUERY PLAN against the real schema. And their cached statements stay
//! prepared when rebound with new values, so a lookup never pays for a fresh plan.

use crate::support::common;

use rusqlite::StatementStatus;
use threadbase::store::list::{list, ListQuery, StateFilter, Subtree, VisibilityFilter};
use threadbase::store::refs::{resolve, RefScope};
use threadbase::Store;

/// The query text without its comment lines.
fn statement(sql: &str) -> String {
    sql.lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The EXPLAIN QUERY PLAN steps of `sql`, every parameter bound to 1, joined with ` | `.
/// `(name, text)` of the query `sql/<name>.sql`.
macro_rules! sql {
    ($name:literal) => {
        (
            $name,
            // A row query's placeholder expanded as the store does (leaked: a test's text).
            &*Box::leak(
                crate::support::common::expand_rows(include_str!(concat!(
                    "../../sql/",
                    $name,
                    ".sql"
                )))
                .into_boxed_str(),
            ),
        )
    };
}

/// Each case's query planned on an empty database: its name, its plan (as `plan`) and the rest
/// of the case.
fn plans<'a, T>(
    cases: impl IntoIterator<Item = ((&'a str, &'a str), T)>,
) -> Vec<(&'a str, String, T)> {
    let db = common::temp_db();
    let store = Store::open(&db.path).unwrap();
    let conn = store.read().unwrap();
    cases
        .into_iter()
        .map(|((name, sql), rest)| (name, plan(conn.sqlite().unwrap(), &statement(sql)), rest))
        .collect()
}

/// Asserts that the plan `text` of the query `name` contains each of `wants`.
fn assert_contains_all(name: &str, text: &str, wants: &[&str]) {
    for want in wants {
        assert!(text.contains(want), "{name}: {text}");
    }
}

/// Asserts that the only scan in the plan `text` of the query `name` is of its ids array (the
/// `json_each` table `j`).
fn assert_scans_only_the_ids(name: &str, text: &str) {
    assert!(
        text.replace("SCAN j VIRTUAL TABLE", "")
            .find("SCAN")
            .is_none(),
        "{name} scans: {text}"
    );
}

fn plan(conn: &rusqlite::Connection, sql: &str) -> String {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    for i in 1..=stmt.parameter_count() {
        stmt.raw_bind_parameter(i, 1).unwrap();
    }
    let mut rows = stmt.raw_query();
    let mut steps = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        steps.push(r.get::<_, String>(3).unwrap());
    }
    steps.join(" | ")
}

#[test]
fn hot_queries_use_their_indexes() {
    let cases: [((&str, &str), &[&str]); 7] = [
        (
            sql!("thread_by_id"),
            &["USING INDEX sqlite_autoindex_threads_1 (id=?)"],
        ),
        (sql!("thread_by_path"), &["(manager_id=? AND path=?)"]),
        (
            sql!("thread_by_name"),
            &["USING INDEX threads_by_task_name (manager_id=? AND task_name=?)"],
        ),
        (
            sql!("list_children"),
            &["USING INDEX threads_by_parent (manager_id=? AND parent_path=?)"],
        ),
        (
            sql!("list_descendants"),
            &["USING INDEX threads_by_sort_key (manager_id=? AND sort_key>? AND sort_key<?)"],
        ),
        (
            sql!("list_all"),
            &["USING INDEX threads_by_sort_key (manager_id=?)"],
        ),
        (sql!("event_last_at"), &["USING PRIMARY KEY (thread_id=?)"]),
    ];
    for (name, text, wants) in plans(cases) {
        assert_contains_all(name, &text, wants);
        assert!(!text.contains("SCAN"), "{name} scans: {text}");
        assert!(!text.contains("TEMP B-TREE"), "{name} sorts: {text}");
    }
}

/// Every list variant (state × visibility × parent/ancestor/none) is an index search in list
/// order, and the filters that keep few rows (`state: live`, `visibility: archived`) read a
/// partial index holding only those rows.
#[test]
fn every_list_variant_is_an_index_search() {
    let db = common::temp_db();
    let store = Store::open(&db.path).unwrap();
    let conn = store.read().unwrap();
    for state in [StateFilter::All, StateFilter::Live, StateFilter::Closed] {
        for visibility in [
            VisibilityFilter::Active,
            VisibilityFilter::Archived,
            VisibilityFilter::All,
        ] {
            for subtree in [
                Subtree::Everything,
                Subtree::ChildrenOf("/root/a".into()),
                Subtree::DescendantsOf("/root/a".into()),
            ] {
                let name = format!("{state:?} {visibility:?} {subtree:?}");
                let q = ListQuery {
                    state,
                    visibility,
                    subtree: subtree.clone(),
                };
                let text = plan(
                    conn.sqlite().unwrap(),
                    &statement((threadbase::store::list::statement(&q).sqlite)()),
                );
                let index = match (state, visibility, &subtree) {
                    (StateFilter::Live, _, Subtree::Everything) => {
                        "USING INDEX threads_live_by_sort_key (manager_id=?)"
                    }
                    (StateFilter::Live, _, _) => {
                        "USING INDEX threads_live_by_sort_key (manager_id=? AND sort_key>? AND sort_key<?)"
                    }
                    (_, VisibilityFilter::Archived, Subtree::Everything) => {
                        "USING INDEX threads_archived_by_sort_key (manager_id=?)"
                    }
                    (_, VisibilityFilter::Archived, _) => {
                        "USING INDEX threads_archived_by_sort_key (manager_id=? AND sort_key>? AND sort_key<?)"
                    }
                    (_, _, Subtree::Everything) => "USING INDEX threads_by_sort_key (manager_id=?)",
                    (_, _, Subtree::ChildrenOf(_)) => {
                        "USING INDEX threads_by_parent (manager_id=? AND parent_path=?)"
                    }
                    (_, _, Subtree::DescendantsOf(_)) => {
                        "USING INDEX threads_by_sort_key (manager_id=? AND sort_key>? AND sort_key<?)"
                    }
                };
                assert!(text.contains(index), "{name}: {text}");
                assert!(text.starts_with("SEARCH"), "{name}: {text}");
                assert!(!text.contains("SCAN"), "{name} scans: {text}");
                assert!(!text.contains("TEMP B-TREE"), "{name} sorts: {text}");
            }
        }
    }
}

/// A list's batch reads the outputs and events of its ids by primary key, whatever the table
/// size.
#[test]
fn batched_facts_are_primary_key_lookups() {
    for (name, text, want) in plans([
        (
            sql!("events_of_threads"),
            "SEARCH e USING PRIMARY KEY (thread_id=? AND seq>?)",
        ),
        (
            sql!("events_of_threads"),
            "SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)",
        ),
        (
            sql!("outputs_of_threads"),
            "SEARCH o USING PRIMARY KEY (thread_id=?)",
        ),
    ]) {
        assert!(text.contains(want), "{name}: {text}");
        assert_scans_only_the_ids(name, &text);
        assert!(!text.contains("TEMP B-TREE"), "{name} sorts: {text}");
    }
}

/// The rows of a list batch's threads whose answers the serve does not keep are read by
/// primary key, whatever the table sizes.
#[test]
fn a_list_batch_reads_its_rows_by_primary_key() {
    for (name, text, want) in plans([(
        sql!("threads_by_ids"),
        "SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)",
    )]) {
        assert!(text.contains(want), "{name}: {text}");
        assert_scans_only_the_ids(name, &text);
    }
}

/// SQLite re-prepares a statement on its next step whenever a parameter whose value the planner
/// looked at is rebound (it reads a `LIMIT ?` value, for one), which costs ten times the lookup
/// itself. The store's connections run with the query planner stability guarantee, so the hot
/// statements never are.
#[test]
fn hot_statements_are_not_reprepared_when_rebound() {
    let db = common::temp_db();
    let store = Store::open(&db.path).unwrap();
    let m = common::manager(&store, "s");
    common::add(
        &store,
        &[
            common::thread(&common::tid(1), m, "/root/a", true),
            common::thread(&common::tid(2), m, "/root/a/x", true),
            common::thread(&common::tid(3), m, "/root/b", false),
            common::thread(&common::tid(4), m, "/root/b/x", true),
            common::thread(&common::tid(5), m, "/root/b/y", true),
        ],
    );
    let conn = store.read().unwrap();
    let scope = RefScope {
        manager_id: m,
        current_path: "/root",
        self_id: None,
    };
    let (id2, id9) = (common::tid(2), common::tid(9));
    for _ in 0..3 {
        for reference in [
            &id2, &id9, "a", "b/x", "/root/b", "y", "x", "nope", "Bad Name",
        ] {
            let _ = resolve(&conn, scope, reference);
        }
        for (parent, state, visibility) in [
            ("/root/a", StateFilter::All, VisibilityFilter::Active),
            ("/root/b", StateFilter::Live, VisibilityFilter::All),
            ("/root", StateFilter::Closed, VisibilityFilter::Archived),
        ] {
            for subtree in [
                Subtree::ChildrenOf(parent.into()),
                Subtree::DescendantsOf(parent.into()),
                Subtree::Everything,
            ] {
                let q = ListQuery {
                    state,
                    visibility,
                    subtree,
                };
                list(&conn, m, &q).unwrap();
            }
        }
    }
    for (name, sql) in [
        sql!("thread_by_id"),
        sql!("thread_by_path"),
        sql!("thread_by_name"),
        sql!("threads_known"),
        sql!("list_children"),
        sql!("list_descendants"),
        sql!("list_all"),
        sql!("list_all_live"),
        sql!("list_children_live"),
        sql!("list_descendants_live"),
        sql!("list_all_archived"),
        sql!("list_children_archived"),
        sql!("list_descendants_archived"),
    ] {
        let stmt = conn.sqlite().unwrap().prepare_cached(sql).unwrap();
        assert!(
            stmt.get_status(StatementStatus::VmStep) > 0,
            "{name} never ran"
        );
        assert_eq!(
            stmt.get_status(StatementStatus::RePrepare),
            0,
            "{name} was re-prepared"
        );
    }
}

/// The queries of the CLI's stop and of contract B's superseded notices read only their rows.
#[test]
fn stop_and_notice_queries_use_their_indexes() {
    for (name, text, want) in plans([
        (sql!("stop_candidates"), "USING INDEX threads_live"),
        (
            sql!("agent_notice_reopen"),
            "SEARCH mailbox USING INTEGER PRIMARY KEY",
        ),
        (
            sql!("agent_notices_supersede"),
            // Either partial index of pending rows (by thread or by recipient) is a short range.
            "SEARCH mailbox USING INDEX mailbox_",
        ),
    ]) {
        assert!(text.contains(want), "{name}: {text}");
    }
}

/// Usage accounting and budgets: every statement is primary-key lookups or one range of
/// `thread_places_by_key` (a subtree, a tree), never a scan of the threads or their places.
#[test]
fn usage_queries_use_their_indexes() {
    let cases: [((&str, &str), &[&str]); 11] = [
        (
            sql!("usage_add"),
            &["SEARCH thread_usage USING PRIMARY KEY (thread_id=?)"],
        ),
        (
            sql!("usage_of_thread"),
            &["SEARCH thread_usage USING PRIMARY KEY (thread_id=?)"],
        ),
        (
            sql!("usage_tree_of"),
            &[
                "SEARCH tree_usage USING PRIMARY KEY (root_session=?)",
                "SEARCH session_usage USING PRIMARY KEY (session_id=?)",
                "SEARCH thread_places USING PRIMARY KEY (thread_id=?)",
            ],
        ),
        (
            sql!("usage_of_threads"),
            &["SEARCH u USING PRIMARY KEY (thread_id=?)"],
        ),
        (
            sql!("session_usage_put"),
            &["SEARCH thread_places USING PRIMARY KEY (thread_id=?)"],
        ),
        (
            sql!("usage_below_thread"),
            &[
                "SEARCH a USING PRIMARY KEY (thread_id=?)",
                "SEARCH d USING COVERING INDEX thread_places_by_key (root_session=? AND tree_key>? AND tree_key<?)",
                "SEARCH u USING PRIMARY KEY (thread_id=?)",
            ],
        ),
        (
            sql!("usage_below_session"),
            &["SEARCH tree_usage USING PRIMARY KEY (root_session=?)"],
        ),
        (
            sql!("usage_told_of"),
            &["SEARCH usage_told USING PRIMARY KEY (session_id=?)"],
        ),

        (
            sql!("usage_place"),
            &["SEARCH thread_places USING PRIMARY KEY (thread_id=?)"],
        ),
        (
            sql!("usage_subtree"),
            &[
                "SEARCH a USING PRIMARY KEY (thread_id=?)",
                "SEARCH d USING COVERING INDEX thread_places_by_key (root_session=? AND tree_key>? AND tree_key<?)",
                "SEARCH u USING PRIMARY KEY (thread_id=?)",
            ],
        ),
        (
            sql!("usage_tree_rows"),
            &[
                "SEARCH a USING COVERING INDEX thread_places_by_key (root_session=? AND tree_key>? AND tree_key<?)",
                "SEARCH d USING COVERING INDEX thread_places_by_key (root_session=? AND tree_key>? AND tree_key<?)",
            ],
        ),
    ];
    for (name, text, wants) in plans(cases) {
        assert_contains_all(name, &text, wants);
        // The view's aggregate is read as a co-routine ("SCAN subtree_usage" / "SCAN s" walk
        // its rows); no table or index is scanned.
        for table in [
            "a",
            "d",
            "t",
            "u",
            "p",
            "m",
            "threads",
            "thread_places",
            "thread_usage",
            "tree_usage",
            "session_usage",
            "usage_told",
        ] {
            assert!(
                !text.contains(&format!("SCAN {table} "))
                    && !text.ends_with(&format!("SCAN {table}")),
                "{name} scans {table}: {text}"
            );
        }
    }
}

/// The status line (`--report-status`), read by the row watcher after commits and each second:
/// one range of `thread_places_by_key` for one root session's tree (every manager of it), each
/// thread by primary key and the view `thread_attention` asked by thread id (its primary-key
/// lookups; `host_serves`, a row per serve, is the only table it reads whole); the spend two
/// primary-key lookups. Never a scan of the threads or their places.
#[test]
fn the_status_line_reads_one_trees_range() {
    let (name, text, ()) = plans([(sql!("tree_status"), ())]).remove(0);
    eprintln!("{name}: {text}");
    assert_contains_all(
        name,
        &text,
        &[
            "SEARCH thread_places USING PRIMARY KEY (thread_id=?)",
            "SEARCH p USING COVERING INDEX thread_places_by_key (root_session=?)",
            "SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)",
            "SEARCH o USING PRIMARY KEY (thread_id=?)",
            "SEARCH u USING COVERING INDEX ui_requests_pending (thread_id=?)",
            "SEARCH tree_usage USING PRIMARY KEY (root_session=?)",
            "SEARCH session_usage USING PRIMARY KEY (session_id=?)",
        ],
    );
    // The view is asked once per thread: the conditions are materialized before the count.
    assert_eq!(
        text.matches("CORRELATED SCALAR SUBQUERY").count(),
        2,
        "{name}: {text}"
    );
    let scans = text
        .replace("SCAN CONSTANT ROW", "")
        .replace("SCAN s USING INDEX sqlite_autoindex_host_serves_1", "");
    for table in [
        "t",
        "p",
        "threads",
        "thread_places",
        "thread_output",
        "ui_requests",
    ] {
        assert!(
            !scans.contains(&format!("SCAN {table} "))
                && !scans.ends_with(&format!("SCAN {table}")),
            "{name} scans {table}: {text}"
        );
    }
}

/// The row watcher runs these after every commit to the database (its own serve's included),
/// so each starts from a partial index of pending rows and reaches threads by primary key:
/// never a walk of a manager's threads, which at 1M threads took seconds per commit.
#[test]
fn watcher_queries_follow_the_pending_rows() {
    let cases: [((&str, &str), &str); 3] = [
        (
            sql!("notices_pending"),
            "SCAN mb USING INDEX mailbox_pending",
        ),
        (
            sql!("agent_owned_pending_steers"),
            "SCAN mb USING INDEX mailbox_pending",
        ),
        (
            sql!("commands_pending"),
            "SCAN c USING INDEX commands_pending",
        ),
    ];
    for (name, text, first) in plans(cases) {
        assert!(text.starts_with(first), "{name}: {text}");
        assert!(
            text.contains("SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)"),
            "{name}: {text}"
        );
        assert!(!text.contains("SCAN t"), "{name}: {text}");
    }
}

/// The reach below a manager (references and `parent`/`ancestor` lists into children's own
/// serves) walks down managers_by_parent and reaches threads by index, never scanning the
/// managers or the threads; only the few rows it found are sorted. Whether there is anything
/// below to reach is one search of the same index.
#[test]
fn reach_queries_walk_down_the_managers_index() {
    let cases: [((&str, &str), &str); 5] = [
        (
            sql!("reach_thread_by_id"),
            "SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)",
        ),
        (
            sql!("reach_thread_by_path"),
            "SEARCH t USING INDEX sqlite_autoindex_threads_2 (manager_id=? AND path=?)",
        ),
        (
            sql!("reach_thread_by_name"),
            "SEARCH t USING INDEX threads_by_task_name (manager_id=? AND task_name=?)",
        ),
        (
            sql!("list_children_reach"),
            "SEARCH t USING INDEX threads_by_parent (manager_id=? AND parent_path=?)",
        ),
        (
            sql!("list_descendants_reach"),
            "SEARCH t USING INDEX threads_by_sort_key (manager_id=? AND sort_key>? AND sort_key<?)",
        ),
    ];
    let any = [(sql!("list_reach_any"), "")];
    for (name, text, threads) in plans(cases).into_iter().chain(plans(any)) {
        assert!(
            text.contains("INDEX managers_by_parent (parent_manager_id=? AND contract=?)"),
            "{name}: {text}"
        );
        assert!(text.contains(threads), "{name}: {text}");
        for scan in ["SCAN m ", "SCAN t ", "SCAN managers", "SCAN threads"] {
            assert!(!text.contains(scan), "{name} scans: {text}");
        }
        assert!(
            !text.ends_with("SCAN m") && !text.ends_with("SCAN t"),
            "{name}: {text}"
        );
    }
}

/// The rows one serve writes for another's thread, and what both sides read of them, are
/// primary-key lookups or start from the partial indexes of unfinished commands.
#[test]
fn cross_serve_queries_are_key_lookups() {
    let cases: [((&str, &str), &[&str]); 10] = [
        (
            sql!("thread_holder"),
            &[
                "SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)",
                "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)",
            ],
        ),
        (
            sql!("manager_owner"),
            &["SEARCH managers USING INTEGER PRIMARY KEY (rowid=?)"],
        ),
        (
            sql!("command_state"),
            &["SEARCH commands USING INTEGER PRIMARY KEY (rowid=?)"],
        ),
        (
            sql!("command_claim"),
            &["SEARCH commands USING INTEGER PRIMARY KEY (rowid=?)"],
        ),
        (
            sql!("command_withdraw"),
            &["SEARCH commands USING INTEGER PRIMARY KEY (rowid=?)"],
        ),
        (
            sql!("command_abandon"),
            &["SEARCH commands USING INTEGER PRIMARY KEY (rowid=?)"],
        ),
        (
            sql!("command_done"),
            &["SEARCH commands USING INTEGER PRIMARY KEY (rowid=?)"],
        ),
        (
            sql!("command_send_under_way"),
            &[
                "SEARCH commands USING INDEX commands_pending (thread_id=?)",
                "SEARCH commands USING INDEX commands_running (thread_id=?)",
            ],
        ),
        (
            sql!("thread_ancestors"),
            &["SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)"],
        ),
        (
            sql!("check_stale_commands"),
            &[
                "SCAN c USING INDEX commands_pending",
                "SCAN c USING INDEX commands_running",
            ],
        ),
    ];
    for (name, text, wants) in plans(cases) {
        assert_contains_all(name, &text, wants);
        for scan in [
            "SCAN t",
            "SCAN m",
            "SCAN managers",
            "SCAN threads",
            "SCAN commands",
        ] {
            assert!(!text.contains(scan), "{name} scans: {text}");
        }
    }
}

/// Contract B's list and stop queries: the root's list is one range of threads_agent_by_manager,
/// already in spawn (rowid) order; a child's list reads its own row and one subtree range of
/// threads_by_sort_key into a rowid list (in order, no sort step); agent_stop reads one subtree
/// range and sorts only those rows (deepest first); a settled stop is a primary-key update.
/// Never a scan of the threads.
#[test]
fn agent_list_and_stop_queries_use_their_indexes() {
    let cases: [((&str, &str), &str, bool); 4] = [
        (
            sql!("agent_threads_all"),
            "SEARCH threads USING INDEX threads_agent_by_manager (manager_id=?)",
            false,
        ),
        (
            sql!("agent_threads_under"),
            "USING INDEX threads_by_sort_key (manager_id=? AND sort_key>? AND sort_key<?)",
            false,
        ),
        (
            sql!("agent_stop_targets"),
            "USING INDEX threads_by_sort_key (manager_id=? AND sort_key>? AND sort_key<?)",
            true,
        ),
        (
            sql!("agent_stop_settled"),
            "SEARCH threads USING INDEX sqlite_autoindex_threads_1 (id=?)",
            false,
        ),
    ];
    for (name, text, (want, sorts)) in
        plans(cases.map(|(query, want, sorts)| (query, (want, sorts))))
    {
        assert!(text.contains(want), "{name}: {text}");
        assert!(
            !text.contains("SCAN threads"),
            "{name} scans the threads: {text}"
        );
        assert_eq!(text.contains("TEMP B-TREE"), sorts, "{name}: {text}");
    }
}

/// Contract B's single-row reads (the main session's file at every spawn, a closed run's exit
/// text) are primary-key searches.
#[test]
fn agent_row_reads_are_key_lookups() {
    let db = common::temp_db();
    let store = Store::open(&db.path).unwrap();
    let conn = store.read().unwrap();
    for (name, sql, want) in [
        (
            "agent_registry_session_file",
            include_str!("../../sql/agent_registry_session_file.sql"),
            "SEARCH managers USING INTEGER PRIMARY KEY (rowid=?)",
        ),
        (
            "agent_exit_message",
            include_str!("../../sql/agent_exit_message.sql"),
            "SEARCH threads USING INDEX sqlite_autoindex_threads_1 (id=?)",
        ),
    ] {
        assert_eq!(
            plan(conn.sqlite().unwrap(), &statement(sql)),
            want,
            "{name}"
        );
    }
}

/// `threadbase top` showing a subtree reads one range of threads_by_sort_key per manager,
/// already in its order: no scan of the threads, no sort step.
#[test]
fn top_subtree_is_one_range_per_manager() {
    let db = common::temp_db();
    let store = Store::open(&db.path).unwrap();
    let conn = store.read().unwrap();
    let text = plan(
        conn.sqlite().unwrap(),
        &statement(&crate::support::common::expand_rows(include_str!(
            "../../sql/top_threads_under.sql"
        ))),
    );
    assert!(
        text.contains(
            "SEARCH t USING INDEX threads_by_sort_key (manager_id=? AND sort_key>? AND sort_key<?)"
        ),
        "{text}"
    );
    assert!(!text.contains("SCAN t"), "top scans the threads: {text}");
    assert!(!text.contains("TEMP B-TREE"), "top sorts: {text}");
}

/// Contract A's notices (issue 28) and adoption: every statement reads its rows by key or by
/// one index range (a thread's pending mailbox rows, a subtree's places), never a scan of the
/// threads, the managers, the mailbox or the forest.
#[test]
fn notice_and_adoption_queries_are_key_lookups_and_ranges() {
    let cases: [((&str, &str), &[&str]); 9] = [
        (
            sql!("thread_notice_facts"),
            &[
                "SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)",
                "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)",
                "SEARCH o USING PRIMARY KEY (thread_id=?)",
            ],
        ),
        (
            sql!("notices_quiet"),
            &["SEARCH mailbox USING INDEX mailbox_pending (thread_id=?)"],
        ),
        (
            sql!("thread_phase"),
            &["SEARCH threads USING INDEX sqlite_autoindex_threads_1 (id=?)"],
        ),
        (
            sql!("adopt_candidates"),
            &[
                "INDEX sqlite_autoindex_threads_1 (id=?)",
                "INDEX threads_global_sort (sort_key=?)",
                "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)",
            ],
        ),
        (
            sql!("adopt_target"),
            &["SEARCH m USING INTEGER PRIMARY KEY (rowid=?)"],
        ),
        (
            sql!("adopt_place"),
            &[
                "SEARCH p USING PRIMARY KEY (thread_id=?)",
                "SEARCH d USING COVERING INDEX thread_places_by_key (root_session=? AND tree_key>? AND tree_key<?)",
            ],
        ),
        (
            sql!("adopt_subtree_usage"),
            &[
                "INDEX thread_places_by_key (root_session=? AND tree_key>? AND tree_key<?)",
                "SEARCH u USING PRIMARY KEY (thread_id=?)",
            ],
        ),
        (
            sql!("adopt_move_places"),
            &["INDEX thread_places_by_key (root_session=? AND tree_key>? AND tree_key<?)"],
        ),
        (
            sql!("adopt_thread"),
            &["SEARCH threads USING INDEX sqlite_autoindex_threads_1 (id=?)"],
        ),
    ];
    for (name, text, wants) in plans(cases) {
        assert_contains_all(name, &text, wants);
        for scan in [
            "SCAN t ",
            "SCAN m ",
            "SCAN managers",
            "SCAN threads",
            "SCAN mailbox",
            "SCAN thread_places",
            "SCAN d",
            "SCAN p",
        ] {
            assert!(
                !text.contains(scan) && !text.ends_with(scan.trim()),
                "{name} scans: {text}"
            );
        }
    }
}

/// `--session` and the many-session views: the sessions come from tree_usage (a row per root
/// session) and the managers' unique (session_id, contract) index; a manager's session id or
/// prefix is a range of that index; a reference inside one session is the by-path or by-name
/// lookup with a thread_places primary-key check per hit; an ambiguity report's sessions are
/// primary-key lookups per candidate.
#[test]
fn session_queries_use_their_indexes() {
    let cases: [((&str, &str), &[&str]); 5] = [
        (
            sql!("root_sessions"),
            &["USING INDEX sqlite_autoindex_managers_1 (session_id=?)"],
        ),
        (
            sql!("root_sessions_of_managers"),
            &[
                "SEARCH m USING INDEX sqlite_autoindex_managers_1 (session_id>? AND session_id<?)",
                "SEARCH p USING PRIMARY KEY (thread_id=?)",
                "SEARCH t USING INDEX threads_by_task_name (manager_id=?)",
            ],
        ),
        (
            sql!("sessions_of_threads"),
            &[
                "SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)",
                "SEARCH p USING PRIMARY KEY (thread_id=?)",
            ],
        ),
        (
            sql!("thread_by_path_in_session"),
            &[
                "USING INDEX threads_global_sort (sort_key=?)",
                "SEARCH p EXISTS USING PRIMARY KEY (thread_id=?)",
            ],
        ),
        (
            sql!("thread_by_path_any"),
            &["USING INDEX threads_global_sort (sort_key=?)"],
        ),
    ];
    for (name, text, wants) in plans(cases) {
        assert_contains_all(name, &text, wants);
        let rest = text
            .replace("SCAN j VIRTUAL TABLE", "")
            .replace("SCAN u", "");
        assert!(!rest.contains("SCAN"), "{name} scans: {text}");
    }
}

/// Contract B's report-only timers (issue 29): the serve's next deadline and its due timers are
/// one range of the partial index threads_agent_timers (owner, then deadline); firing one is a
/// primary-key update. Never a scan of the threads.
#[test]
fn agent_timer_queries_read_the_timers_index() {
    let cases = [
        (
            sql!("agent_timer_next"),
            "threads_agent_timers (owner_pid=? AND agent_timeout_at>?)",
        ),
        (
            sql!("agent_timers_due"),
            "threads_agent_timers (owner_pid=? AND agent_timeout_at>? AND agent_timeout_at<?)",
        ),
        (
            sql!("agent_timer_fire"),
            "SEARCH threads USING INDEX sqlite_autoindex_threads_1 (id=?)",
        ),
        (
            sql!("agent_timer_arm"),
            "SEARCH threads USING INDEX sqlite_autoindex_threads_1 (id=?)",
        ),
    ];
    for (name, text, want) in plans(cases) {
        assert!(text.contains(want), "{name}: {text}");
        assert!(!text.contains("SCAN threads"), "{name} scans: {text}");
    }
}

/// Contract B's reap (issue 29): the candidates are one range of the registry's contract B rows
/// and, per candidate, one range of its descendants in threads_by_sort_key; marking one is a
/// primary-key update.
#[test]
fn agent_reap_queries_use_their_indexes() {
    let cases = [
        (
            sql!("agent_reap_candidates"),
            "USING INDEX threads_by_sort_key (manager_id=? AND sort_key>? AND sort_key<?)",
        ),
        (
            sql!("agent_reap_mark"),
            "SEARCH threads USING INDEX sqlite_autoindex_threads_1 (id=?)",
        ),
    ];
    for (name, text, want) in plans(cases) {
        assert!(text.contains(want), "{name}: {text}");
        assert!(!text.contains("SCAN t"), "{name} scans: {text}");
        assert!(!text.contains("SCAN threads"), "{name} scans: {text}");
    }
}

/// Contract B's final recap (issue 29): the outstanding detached runs are one range of the
/// partial index threads_agent_active, the held results one range of mailbox_agent_notices.
#[test]
fn agent_recap_queries_use_their_indexes() {
    let cases = [
        (
            sql!("agent_recap_outstanding"),
            "SEARCH threads USING INDEX threads_agent_active (manager_id=?)",
        ),
        (
            sql!("agent_recap_held"),
            "SEARCH mb USING INDEX mailbox_agent_notices (recipient_path=?)",
        ),
        (
            sql!("agent_set_run"),
            "SEARCH threads USING INDEX sqlite_autoindex_threads_1 (id=?)",
        ),
    ];
    for (name, text, want) in plans(cases) {
        assert!(text.contains(want), "{name}: {text}");
        assert!(!text.contains("SCAN"), "{name} scans: {text}");
    }
}

/// Issue 30's queue and questions: the queue's rank, a position, the slot claim (one query for
/// the three contracts' lanes), each lane's slot count and which idle threads yield their slots (issue 45) read the partial indexes of the waiting and live rows (a handful each), and a
/// thread's pending questions are one range of ui_requests_pending; none scans a table. A list
/// batch's positions and questions are the same lookups per id of its JSON array.
#[test]
fn queue_and_question_queries_use_their_indexes() {
    let cases: [((&str, &str), &[&str]); 14] = [
        (
            sql!("count_live"),
            &["USING INDEX threads_live (manager_id=?)"],
        ),
        (
            sql!("agent_count_active"),
            &["USING INDEX threads_agent_by_manager (manager_id=?)"],
        ),
        (
            sql!("worker_slots_used"),
            &[
                "SEARCH t USING INDEX threads_by_spawn_key (coordinator_id=?",
                "USING COVERING INDEX sqlite_autoindex_reports_1 (worker_id=?)",
            ],
        ),
        (
            sql!("queue_yield"),
            &[
                "USING INDEX threads_queue_waiting (manager_id=?)",
                "USING INDEX threads_live (manager_id=?)",
                "USING INDEX threads_live (manager_id=? AND owner_pid=?)",
            ],
        ),
        (
            sql!("queue_rank"),
            &["USING INDEX threads_queue_waiting (manager_id=?)"],
        ),
        (
            sql!("queue_position"),
            &[
                "USING INDEX sqlite_autoindex_threads_1 (id=?)",
                "USING INDEX threads_queue_waiting (manager_id=?",
            ],
        ),
        (
            sql!("queue_claim"),
            &[
                "INDEX sqlite_autoindex_threads_1 (id=?)",
                "USING INDEX threads_queue_waiting (manager_id=?)",
            ],
        ),
        (
            sql!("queue_to_launch"),
            &["USING INDEX threads_live (manager_id=?)"],
        ),
        (
            sql!("question_pending"),
            &["USING INDEX ui_requests_pending (thread_id=?)"],
        ),
        (
            sql!("queue_positions_of_threads"),
            &[
                "SCAN j VIRTUAL TABLE",
                "SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)",
                "SEARCH q USING INDEX threads_queue_waiting (manager_id=? AND rowid<?)",
            ],
        ),
        (
            sql!("questions_pending_of_threads"),
            &[
                "SCAN j VIRTUAL TABLE",
                "SEARCH r USING INTEGER PRIMARY KEY (rowid=?)",
                "SEARCH p USING COVERING INDEX ui_requests_pending (thread_id=?)",
            ],
        ),
        (
            sql!("question_cancel_thread"),
            // A covering read of the index since V16's trigger on ui_requests: either way one
            // range of the partial index.
            &["INDEX ui_requests_pending (thread_id=?)"],
        ),
        (
            sql!("question_answer"),
            &["USING INTEGER PRIMARY KEY (rowid=?)"],
        ),
        (
            sql!("question_end"),
            &["USING INTEGER PRIMARY KEY (rowid=?)"],
        ),
    ];
    for (name, text, wants) in plans(cases) {
        assert_contains_all(name, &text, wants);
        assert!(!text.contains("SCAN threads"), "{name} scans: {text}");
        assert!(!text.contains("SCAN ui_requests"), "{name} scans: {text}");
        if name.ends_with("_of_threads") {
            // A list batch's: the ids array is the only scan, and nothing is sorted.
            assert_scans_only_the_ids(name, &text);
            assert!(!text.contains("TEMP B-TREE"), "{name} sorts: {text}");
        }
    }
}

/// The web view's page is one range of `thread_places_by_key` (the skipped rows read from the
/// index alone), then primary-key lookups for the page's rows; its subtree totals are one range
/// per listed thread; a filtered page walks the one tree's range in order (no sort); an
/// action's command is a primary-key lookup.
#[test]
fn web_queries_use_their_indexes() {
    for (name, text, wants) in plans([
        (
            sql!("web_page"),
            &[
                "SEARCH thread_places USING COVERING INDEX thread_places_by_key (root_session=?)",
                "SEARCH p USING PRIMARY KEY (thread_id=?)",
                "SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)",
                "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)",
                "SEARCH u USING PRIMARY KEY (thread_id=?)",
            ][..],
        ),
        (
            sql!("web_page_filtered"),
            &[
                "SEARCH p USING INDEX thread_places_by_key (root_session=?)",
                "SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)",
            ][..],
        ),
        (
            sql!("web_subtree_totals"),
            &[
                "SEARCH a USING PRIMARY KEY (thread_id=?)",
                "SEARCH d USING COVERING INDEX thread_places_by_key (root_session=? AND tree_key>? AND tree_key<?)",
                "SEARCH u USING PRIMARY KEY (thread_id=?)",
            ][..],
        ),
        (
            sql!("web_command"),
            &["SEARCH commands USING INTEGER PRIMARY KEY (rowid=?)"][..],
        ),
        // Issue 50: the detail's prompt and the messages sent since (one thread's range of
        // the mailbox's key, read newest first by id).
        (
            sql!("web_thread_prompt"),
            &["SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)"][..],
        ),
        (
            sql!("web_thread_messages"),
            &["SEARCH mb USING INDEX sqlite_autoindex_mailbox_1 (thread_id=?)"][..],
        ),
    ]) {
        eprintln!("{name}: {text}");
        assert_contains_all(name, &text, wants);
        let scans = text
            .replace("SCAN j VIRTUAL TABLE", "")
            .replace("SCAN k", "");
        assert!(!scans.contains("SCAN"), "{name} scans: {text}");
        if name != "web_subtree_totals" && name != "web_thread_messages" {
            assert!(!text.contains("TEMP B-TREE"), "{name} sorts: {text}");
        }
    }
    // Live threads only: the page and the counts read the partial index of live rows, each
    // thread placed by primary key (a sort of the tree's live rows, few, for the page).
    for (name, text, ()) in plans([(sql!("web_page_live"), ()), (sql!("web_counts_live"), ())]) {
        eprintln!("{name}: {text}");
        assert!(
            text.contains("SCAN t USING INDEX threads_live_by_sort_key"),
            "{name}: {text}"
        );
        assert!(
            text.contains("SEARCH p USING PRIMARY KEY (thread_id=?)"),
            "{name}: {text}"
        );
    }
    // The filtered counts read every place once, in index order (a glob has no index), and
    // group without a sort.
    let (name, text, ()) = plans([(sql!("web_counts_filtered"), ())]).remove(0);
    eprintln!("{name}: {text}");
    assert!(
        text.contains("SCAN p USING COVERING INDEX thread_places_by_key"),
        "{name}: {text}"
    );
    assert!(!text.contains("TEMP B-TREE"), "{name} sorts: {text}");
}

/// The hosts' queries for the views (issue 33): a list batch's or a poll's unreachable hosts
/// are key lookups from its ids (the thread, its manager, the host's serve rows by the
/// primary key of `host_serves`; the lease's cutoff, the view `host_lease`, is one row computed
/// once from `host_serves`' handful of rows), and `hosts_recorded` reads the schema.
/// `thread_hosts`, for
/// `tree`, `list`, `top` and `usage`, reads every thread as those views do, each manager by
/// its key.
#[test]
fn host_queries_are_key_lookups() {
    for (name, text, wants) in plans([
        (
            sql!("threads_unreachable"),
            &[
                "SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)",
                "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)",
                "SEARCH h USING INDEX sqlite_autoindex_host_serves_1 (host_id=?)",
            ][..],
        ),
        (
            sql!("thread_hosts"),
            &["SCAN t", "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)"][..],
        ),
    ]) {
        assert_contains_all(name, &text, wants);
        if name == "threads_unreachable" {
            // host_lease's one row (issue 46): a constant row and its scalar subqueries.
            let text = text.replace("SCAN CONSTANT ROW", "").replace("SCAN x", "");
            assert_scans_only_the_ids(name, &text);
        }
    }
}

/// The budget check's queries (V15, issue 33): the database's caps are a read of `budgets`
/// (two rows at most), and the team's spend sums `tree_usage` and `session_usage` (a row per
/// root session each), never `threads`.
#[test]
fn budget_queries_never_read_the_threads() {
    for (name, text, ()) in plans([(sql!("team_spend"), ()), (sql!("budgets_all"), ())]) {
        assert!(!text.contains("threads"), "{name}: {text}");
        if name == "team_spend" {
            assert_contains_all(name, &text, &["tree_usage", "session_usage"]);
        }
    }
}

/// Issue 45: what the whole-database views (`tree`, `list`, `usage`, `top`) read of what needs
/// the user: only the live threads and the closed ones that ended failed, each from its partial
/// index, pushed into the view by id; the other closed threads are never read.
#[test]
fn the_views_read_attention_of_the_live_and_the_failed_threads_only() {
    for (name, text, ()) in plans([(sql!("attention_all"), ())]) {
        assert_contains_all(
            name,
            &text,
            &[
                "SCAN t USING INDEX threads_live",
                "SCAN t USING INDEX threads_ended_failed",
                "SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)",
            ],
        );
        let scans: Vec<&str> = text.split(" | ").filter(|l| l.contains("SCAN")).collect();
        assert!(
            scans.iter().all(|l| *l == "SCAN t USING INDEX threads_live"
                || *l == "SCAN t USING INDEX threads_ended_failed"
                || l.starts_with("SCAN s USING INDEX sqlite_autoindex_host_serves_1")
                || *l == "SCAN CONSTANT ROW"
                || *l == "SCAN x"),
            "{name}: {text}"
        );
    }
}

/// Issue 50: the page's "needs you" band reads the live threads from the partial index of live
/// rows and the closed ones that ended failed from theirs (V19), and pushes each into the view
/// `thread_attention` by id (its rows found by key), the host serves read once; the band's few
/// rows sorted. No other closed thread is read.
#[test]
fn the_needs_band_reads_only_the_live_and_the_failed_threads() {
    for (name, text, ()) in plans([(sql!("web_needs"), ())]) {
        eprintln!("{name}: {text}");
        assert_contains_all(
            name,
            &text,
            &[
                "SCAN t USING INDEX threads_live",
                "SCAN t USING INDEX threads_ended_failed",
                "SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)",
            ],
        );
        // The only scans: the two partial indexes, and host_serves (a row per serve) once
        // per branch of the union, and the lease's cutoff (the view host_lease, issue 46: one
        // constant row of scalar subqueries over host_serves).
        let scans: Vec<&str> = text.split(" | ").filter(|l| l.contains("SCAN")).collect();
        assert!(
            scans.iter().all(|l| *l == "SCAN t USING INDEX threads_live"
                || *l == "SCAN t USING INDEX threads_ended_failed"
                || *l == "SCAN s USING INDEX sqlite_autoindex_host_serves_1"
                || *l == "SCAN CONSTANT ROW"
                || *l == "SCAN x"),
            "{name}: {text}"
        );
    }
}

/// Issue 46: a poll's facts are one statement (`sql/thread_facts.sql`) whose every part is a
/// lookup by the thread's id: its row, output, usage, worktree and events by primary key, its
/// queue position and pending question from their partial indexes, what needs the user pushed
/// into the view by id, its host's serve rows by key. No table is scanned but `host_serves`
/// (a row per serve) inside the view, as every read of the view does; the other scans are of
/// the parts' derived tables, each of one row at most (the events' of its primary-key range).
#[test]
fn a_threads_facts_are_key_lookups() {
    for (name, text, ()) in plans([(sql!("thread_facts"), ())]) {
        assert_contains_all(
            name,
            &text,
            &[
                "SEARCH t USING INDEX sqlite_autoindex_threads_1 (id=?)",
                "SEARCH thread_output USING PRIMARY KEY (thread_id=?)",
                "SEARCH thread_usage USING PRIMARY KEY (thread_id=?)",
                "SEARCH q USING INDEX threads_queue_waiting (manager_id=? AND rowid<?)",
                "SEARCH r USING INDEX ui_requests_pending (thread_id=?)",
                "SEARCH w USING PRIMARY KEY (thread_id=?)",
                "SEARCH h USING INDEX sqlite_autoindex_host_serves_1 (host_id=?)",
                "SEARCH e USING PRIMARY KEY (thread_id=?)",
            ],
        );
        let derived = ["r", "b", "hh", "x", "h", "ev", "e", "CONSTANT ROW"];
        for step in text.split(" | ").filter(|l| l.contains("SCAN")) {
            let what = step
                .trim_start_matches("SCAN ")
                .trim_end_matches(" LEFT-JOIN");
            assert!(
                derived.contains(&what) || what == "s USING INDEX sqlite_autoindex_host_serves_1",
                "{name} scans {step}: {text}"
            );
        }
        assert!(!text.contains("TEMP B-TREE"), "{name} sorts: {text}");
    }
}
