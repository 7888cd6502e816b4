//! How a row is declared, once: [`columns!`] names its columns in order, each with the SQL
//! expression that selects it, and gives their positions and the select list. Every query of
//! `sql/` whose rows are read as more than one value writes placeholders instead of a select
//! list (`SELECT {thread_row} FROM threads t …`; the declaration names its placeholder) and
//! names the tables and aliases the expressions read itself; [`row_sql!`] expands them once per
//! query, at its first use. The struct (or the tuple) and its reader stand right below the
//! declaration, in the module that owns the row, and read by the declared positions
//! (`r.get(col::PATH)`). A query that returns one scalar (a count, an id, a flag) reads
//! `r.get(0)` and declares nothing. A module's main row is `col`, its others `<row>_col`; a
//! placeholder names the row (`{adopt_target_row}`) and ends in `_row}`.
//!
//! A query's select list may be several placeholders, one after another: a row that several
//! queries share after columns of their own is declared once and read from where it starts.
//! A list batch's query begins with `{batch_row}` (`store::batch_col`, the id's position in
//! the batch) and reads its row from `batch_col::COUNT` (`SELECT {batch_row}, {output_row}
//! …`); a worker's report follows its row (`{worker_row}, {report_row}`, read from
//! `workers::col::COUNT`); usage counts follow the columns that say whose they are.
//!
//! So a new column of a row is three lines in one file (the column, the field, its read),
//! whatever the number of queries that return the row; a new row is a declaration, its struct
//! and reader, its placeholder in its queries, and a line in `tests/it/support/common.rs`
//! `ROWS`, whose tests check that every query holding placeholders prepares and returns
//! exactly their columns, and that no placeholder of `sql/` and no declaration is missing
//! there.
//!
//! Every row reads by position (a name lookup per field would cost a list of 100k threads a
//! few µs per thread); the positions come from the declaration, so they can't drift.

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
