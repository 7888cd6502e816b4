//! How a row type is declared, once: [`columns!`] names its columns in order, each with the
//! SQL expression that selects it, and gives their positions and the select list; the row's
//! struct and its reader stand right below it in the row's module and read by those positions.
//! A query of `sql/` that returns such rows writes the row's placeholder (`{thread_row}`,
//! `{agent_row}`, `{worker_row}`, `{top_row}`: the declaration names it) where its select list
//! goes, and names the tables the expressions read (`threads t`, …) itself: [`row_sql!`]
//! expands the placeholder once per query, at its first use. So adding a column to a row is three lines in one file (the
//! column, the field, its read), whatever the number of queries that return the row.
//!
//! Every row type reads by position (a name lookup per field would cost a list of 100k threads
//! a few µs per thread); the positions come from the declaration, so they can't drift.

/// Declares a row type's columns in order: `NAME = "sql expression"`. Gives, in a module of
/// that name, one `usize` constant per column (its position), `COUNT`, `SELECT` (the
/// expressions joined with `, `), the `PLACEHOLDER` its queries write, and `expand`.
macro_rules! columns {
    ($(#[$m:meta])* $vis:vis mod $module:ident as $placeholder:literal { $first:ident = $first_sql:literal $(, $col:ident = $sql:literal)* $(,)? }) => {
        $(#[$m])*
        #[allow(dead_code)]
        $vis mod $module {
            #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
            enum Position { $first, $($col),* }
            pub const $first: usize = Position::$first as usize;
            $(pub const $col: usize = Position::$col as usize;)*
            /// How many columns the row's queries return.
            pub const COUNT: usize = [Position::$first $(, Position::$col)*].len();
            /// The select list.
            pub const SELECT: &str = concat!($first_sql $(, ", ", $sql)*);
            /// What a query of `sql/` writes where this select list goes.
            pub const PLACEHOLDER: &str = $placeholder;
            /// `sql` with the placeholder replaced by the select list.
            pub fn expand(sql: &str) -> String {
                sql.replace(PLACEHOLDER, SELECT)
            }
        }
    };
}

/// The text of `sql/<name>.sql` with the placeholders of the rows declared in `$row`, … (in
/// the order the query writes them) expanded, made once.
macro_rules! row_sql {
    ($name:literal, $($row:path),+ $(,)?) => {{
        static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        SQL.get_or_init(|| {
            let sql = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/sql/", $name, ".sql"));
            let sql = sql.to_owned();
            $(let sql = {
                use $row as row;
                row::expand(&sql)
            };)+
            sql
        })
        .as_str()
    }};
}

pub(crate) use columns;
pub(crate) use row_sql;

#[cfg(test)]
mod tests {
    crate::store::rows::columns! {
        mod demo as "{demo}" { A = "x.a", B = "x.b AS bee", C = "(SELECT 1) AS c" }
    }

    crate::store::rows::columns! {
        mod one as "{one}" { X = "y.x" }
    }

    #[test]
    fn a_row_of_one_column_follows_another() {
        assert_eq!((one::X, one::COUNT), (0, 1));
        assert_eq!(
            one::expand(&demo::expand("SELECT {demo}, {one} FROM x, y")),
            "SELECT x.a, x.b AS bee, (SELECT 1) AS c, y.x FROM x, y"
        );
    }

    #[test]
    fn a_declaration_gives_positions_count_and_select_list() {
        assert_eq!((demo::A, demo::B, demo::C, demo::COUNT), (0, 1, 2, 3));
        assert_eq!(demo::SELECT, "x.a, x.b AS bee, (SELECT 1) AS c");
        assert_eq!(
            demo::expand("SELECT {demo} FROM x"),
            "SELECT x.a, x.b AS bee, (SELECT 1) AS c FROM x"
        );
    }
}
