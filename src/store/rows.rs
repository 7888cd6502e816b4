//! How a row type is declared, once: [`columns!`] names its columns in order, each with the
//! SQL expression that selects it, and gives their positions and the select list; the row's
//! struct and its reader stand right below it in the row's module and read by those positions.
//! A query of `sql/` that returns such rows writes the row's placeholder (`{thread_row}`,
//! `{agent_row}`, `{worker_row}`, `{top_row}`) where its select list goes, and names the tables
//! the expressions read (`threads t`, …) itself: [`row_sql!`] expands the placeholder once per
//! query, at its first use. So adding a column to a row is three lines in one file (the
//! column, the field, its read), whatever the number of queries that return the row.
//!
//! Every row type reads by position (a name lookup per field would cost a list of 100k threads
//! a few µs per thread); the positions come from the declaration, so they can't drift.

/// Declares a row type's columns in order: `NAME = "sql expression"`. Gives, in a module of
/// that name, one `usize` constant per column (its position), `COUNT`, and `SELECT` (the
/// expressions joined with `, `).
macro_rules! columns {
    ($(#[$m:meta])* $vis:vis mod $module:ident { $first:ident = $first_sql:literal $(, $col:ident = $sql:literal)* $(,)? }) => {
        $(#[$m])*
        #[allow(dead_code)]
        $vis mod $module {
            #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
            enum Position { $first, $($col),* }
            pub const $first: usize = Position::$first as usize;
            $(pub const $col: usize = Position::$col as usize;)*
            /// How many columns the row's queries return.
            pub const COUNT: usize = [$(Position::$col),*].len() + 1;
            /// The select list.
            pub const SELECT: &str = concat!($first_sql $(, ", ", $sql)*);
        }
    };
}

/// The text of `sql/<name>.sql` with its row placeholder expanded ([`expand`]), made once.
macro_rules! row_sql {
    ($name:literal) => {{
        static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        SQL.get_or_init(|| {
            $crate::store::rows::expand(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/sql/",
                $name,
                ".sql"
            )))
        })
        .as_str()
    }};
}

pub(crate) use columns;
pub(crate) use row_sql;

/// The placeholders a query of `sql/` may hold, and the select lists they stand for.
/// (With each row's column count, for the tests.)
const ROWS: [(&str, &str, usize); 4] = [
    ("{thread_row}", threads::SELECT, threads::COUNT),
    ("{agent_row}", agents::SELECT, agents::COUNT),
    ("{worker_row}", workers::SELECT, workers::COUNT),
    ("{top_row}", top::SELECT, top::COUNT),
];

use crate::store::agents::col as agents;
use crate::store::threads::col as threads;
use crate::store::top::col as top;
use crate::store::workers::col as workers;

/// `sql` with each row placeholder replaced by that row's select list (the tests of query
/// plans expand a query the same way).
pub fn expand(sql: &str) -> String {
    ROWS.iter().fold(sql.to_owned(), |sql, (name, select, _)| {
        sql.replace(name, select)
    })
}

#[cfg(test)]
mod tests {
    crate::store::rows::columns! {
        mod demo { A = "x.a", B = "x.b AS bee", C = "(SELECT 1) AS c" }
    }

    #[test]
    fn a_declaration_gives_positions_count_and_select_list() {
        assert_eq!((demo::A, demo::B, demo::C, demo::COUNT), (0, 1, 2, 3));
        assert_eq!(demo::SELECT, "x.a, x.b AS bee, (SELECT 1) AS c");
    }

    /// Every query of `sql/` that holds a row's placeholder prepares against the schema the
    /// migrations build, and returns that row's columns (a query that selects more or fewer
    /// would be read at the wrong positions).
    #[test]
    fn every_row_query_returns_its_rows_columns() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path().join("t.sqlite")).unwrap();
        let conn = store.read().unwrap();
        let mut seen = 0;
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let rows: Vec<_> = super::ROWS
                .iter()
                .filter(|(name, _, _)| text.contains(name))
                .collect();
            let [(_, _, count)] = rows[..] else {
                assert!(rows.is_empty(), "{path:?} holds two rows' placeholders");
                continue;
            };
            let stmt = conn.db().prepare(&super::expand(&text)).unwrap();
            assert_eq!(stmt.column_count(), *count, "{path:?}");
            seen += 1;
        }
        assert!(seen >= 24, "only {seen} row queries found");
    }

    #[test]
    fn placeholders_expand_to_their_rows_select_lists() {
        let sql = super::expand("SELECT {thread_row} FROM threads t WHERE t.id = ?1");
        assert!(sql.starts_with("SELECT t.id, t.manager_id, "), "{sql}");
        assert!(!sql.contains('{'), "{sql}");
    }
}
