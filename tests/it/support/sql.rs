//! A test's own SQL against its database, whichever backend holds it (a SQLite file, or a
//! PostgreSQL schema on a `THREADBASE_TEST_BACKEND=postgres` run): reads through a read-only
//! connection ([`values`], [`count`], [`text`]), writes in one transaction of the store
//! ([`exec`]). Values are written into the statement with [`lit`] (the tests' own strings).
//! A test that means SQLite itself (its file, WAL, pragmas, locks) says so with
//! [`sqlite_only`] and is not run on PostgreSQL.

use std::path::Path;

use threadbase::store::db::Value;

/// Every row `sql` reads, as values.
pub fn values(db: &Path, sql: &str) -> Vec<Vec<Value<'static>>> {
    let conn = threadbase::store::open_read_only(db)
        .unwrap_or_else(|e| panic!("open {}: {e}", db.display()));
    conn.query_values(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .1
}

/// The integer `sql` reads (its first column of its one row).
pub fn count(db: &Path, sql: &str) -> i64 {
    match values(db, sql).first().and_then(|r| r.first()) {
        Some(Value::Int(n)) => *n,
        Some(Value::Null) | None => 0,
        other => panic!("{sql}: not an integer: {other:?}"),
    }
}

/// The text of the first column of every row `sql` reads (NULL as `None`).
pub fn text(db: &Path, sql: &str) -> Vec<Option<String>> {
    values(db, sql)
        .into_iter()
        .map(|r| match r.into_iter().next() {
            Some(Value::Text(t)) => Some(t.into_owned()),
            Some(Value::Int(n)) => Some(n.to_string()),
            Some(Value::Real(x)) => Some(x.to_string()),
            Some(Value::Blob(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
            Some(Value::Null) | None => None,
        })
        .collect()
}

/// Runs `sql` (statements without rows) in one write transaction.
pub fn exec(db: &Path, sql: &str) {
    let store =
        threadbase::Store::open(db).unwrap_or_else(|e| panic!("open {}: {e}", db.display()));
    store
        .write(|tx| tx.execute_script(sql))
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// `s` as a SQL string literal.
pub fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// True (after saying why) when this run is on PostgreSQL and the test means SQLite itself:
/// the caller returns.
pub fn sqlite_only(test: &str, why: &str) -> bool {
    if super::postgres::backend_is_postgres() {
        eprintln!("{test}: runs on SQLite only ({why})");
        return true;
    }
    false
}
