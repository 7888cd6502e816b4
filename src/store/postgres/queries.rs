//! The PostgreSQL text of every query of `sql/`.
//!
//! `sql/NAME.sql` is the one source of a query wherever its SQL is portable; where it cannot be
//! (SQLite's `INDEXED BY`, `CROSS JOIN … ON`, `json_each`, `julianday`, `INSERT OR REPLACE`,
//! `group_concat`, two-argument `max`, `sqlite_schema`, …) `sql/postgres/NAME.sql` says the
//! same thing in PostgreSQL's SQL and is used instead. Both write parameters as SQLite does
//! and row placeholders (`{thread_row}`, …) as `store::rows` declares them; [`Query::postgres`]
//! expands the placeholders and rewrites the parameters to `$N` ([`super::params`]).
//! build.rs lists the files ([`QUERIES`], [`OVERRIDES`]); `tests/it/postgres/queries.rs` prepares
//! every one on a real server and fails on an override without a base file.

use super::params::{positional, Positional};

/// One query of `sql/`: its file's name without `.sql`, its text, and its PostgreSQL override.
#[derive(Debug)]
pub struct Query {
    pub name: &'static str,
    /// `sql/NAME.sql`, as SQLite runs it (placeholders not expanded).
    pub sqlite: &'static str,
    /// `sql/postgres/NAME.sql`, when the query cannot be portable.
    pub override_text: Option<&'static str>,
}

// `QUERIES: &[Query]` (every `sql/*.sql`, by name) and `OVERRIDES: &[&str]` (the names of every
// `sql/postgres/*.sql`): see build.rs.
include!(concat!(env!("OUT_DIR"), "/queries.rs"));

/// Queries that mean something only on SQLite, each with why; PostgreSQL never runs them (and
/// the test that prepares every query skips them). Empty so far: the schema probes
/// (`sqlite_schema`) have overrides that ask `information_schema`.
pub const SQLITE_ONLY: &[(&str, &str)] = &[];

impl Query {
    /// The text PostgreSQL runs: the override if there is one, else the file; row placeholders
    /// expanded, parameters as `$N` (with the names SQLite gives their positions).
    pub fn postgres(&self) -> Positional {
        positional(&expand_rows(self.override_text.unwrap_or(self.sqlite)))
    }
}

/// The query `sql/<name>.sql`.
pub fn find(name: &str) -> Option<&'static Query> {
    QUERIES
        .binary_search_by(|q| q.name.cmp(name))
        .ok()
        .map(|i| &QUERIES[i])
}

/// The overrides in `sql/postgres/` whose query does not exist in `sql/` (a rename or a
/// removal that left the override behind).
pub fn orphan_overrides() -> Vec<&'static str> {
    OVERRIDES
        .iter()
        .copied()
        .filter(|name| find(name).is_none())
        .collect()
}

/// `sql` with every declared row's placeholder replaced by its select list (what `row_sql!`
/// does for the rows it names).
pub fn expand_rows(sql: &str) -> String {
    crate::store::rows::expand_all(sql)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_file_is_listed_once_in_name_order() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let p = e.path();
                (p.extension()? == "sql").then(|| p.file_stem().unwrap().to_string_lossy().into())
            })
            .collect();
        files.sort();
        let listed: Vec<&str> = QUERIES.iter().map(|q| q.name).collect();
        assert_eq!(listed, files);
    }

    #[test]
    fn a_query_is_its_override_or_its_file_with_rows_and_parameters_rewritten() {
        let q = find("thread_by_id").unwrap();
        let pg = q.postgres();
        assert!(!pg.sql.contains("{thread_row}"));
        assert!(pg.sql.contains(crate::store::threads::col::SELECT));
        assert!(pg.sql.contains("$1") && !pg.sql.contains("?1"));
        for q in QUERIES.iter().filter(|q| q.override_text.is_some()) {
            assert_eq!(
                q.postgres().sql,
                positional(&expand_rows(q.override_text.unwrap())).sql
            );
        }
        assert!(find("no_such_query").is_none());
    }

    #[test]
    fn every_sqlite_only_query_exists_and_has_no_override() {
        for (name, why) in SQLITE_ONLY {
            let q = find(name).unwrap_or_else(|| panic!("{name} is not a query of sql/"));
            assert!(
                q.override_text.is_none(),
                "{name} is SQLite-only and overridden"
            );
            assert!(!why.is_empty());
        }
    }
}
