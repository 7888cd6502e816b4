//! The hot queries are index lookups or range scans, never a scan of the manager's threads:
//! checked with EXPLAIN QUERY PLAN against the real schema.

mod common;

use threadbase::Store;

fn plan(conn: &rusqlite::Connection, sql: &str, params: &[(&str, &dyn rusqlite::ToSql)]) -> String {
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let rows = stmt
        .query_map(params, |r| r.get::<_, String>(3))
        .unwrap()
        .map(Result::unwrap)
        .collect::<Vec<_>>();
    rows.join(" | ")
}

#[test]
fn hot_queries_use_their_indexes() {
    let db = common::temp_db();
    let store = Store::open(&db.path).unwrap();
    let conn = store.read().unwrap();
    let cases: [(&str, &str, &str); 6] = [
        (
            "thread_by_id",
            include_str!("../sql/thread_by_id.sql"),
            "USING INDEX sqlite_autoindex_threads_1 (id=?)",
        ),
        (
            "thread_by_path",
            include_str!("../sql/thread_by_path.sql"),
            "(manager_id=? AND path=?)",
        ),
        (
            "thread_by_name",
            include_str!("../sql/thread_by_name.sql"),
            "USING INDEX threads_by_task_name (manager_id=? AND task_name=?)",
        ),
        (
            "list_children",
            include_str!("../sql/list_children.sql"),
            "USING INDEX threads_by_parent (manager_id=? AND parent_path=?)",
        ),
        (
            "list_descendants",
            include_str!("../sql/list_descendants.sql"),
            "USING INDEX threads_by_sort_key (manager_id=? AND sort_key>? AND sort_key<?)",
        ),
        (
            "list_all",
            include_str!("../sql/list_all.sql"),
            "USING INDEX threads_by_sort_key (manager_id=?)",
        ),
    ];
    for (name, sql, want) in cases {
        let sql = sql
            .lines()
            .filter(|l| !l.starts_with("--"))
            .collect::<Vec<_>>()
            .join("\n");
        let named: Vec<(&str, &dyn rusqlite::ToSql)> =
            ["manager", "state", "visibility", "parent", "lo", "hi"]
                .iter()
                .filter(|p| sql.contains(&format!(":{p}")))
                .map(|p| {
                    (
                        match *p {
                            "manager" => ":manager",
                            "state" => ":state",
                            "visibility" => ":visibility",
                            "parent" => ":parent",
                            "lo" => ":lo",
                            _ => ":hi",
                        },
                        &1 as &dyn rusqlite::ToSql,
                    )
                })
                .collect();
        let text = if named.is_empty() {
            let n = sql.matches('?').count();
            let positional: Vec<&dyn rusqlite::ToSql> =
                (0..n).map(|_| &1 as &dyn rusqlite::ToSql).collect();
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows = stmt
                .query_map(positional.as_slice(), |r| r.get::<_, String>(3))
                .unwrap();
            rows.map(Result::unwrap).collect::<Vec<_>>().join(" | ")
        } else {
            plan(&conn, &sql, &named)
        };
        assert!(text.contains(want), "{name}: {text}");
        assert!(!text.contains("SCAN"), "{name} scans: {text}");
        assert!(!text.contains("TEMP B-TREE"), "{name} sorts: {text}");
    }
}
