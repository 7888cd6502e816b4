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
//! and reader, its placeholder in its queries, and a line in [`ROWS`] below (which expands
//! PostgreSQL's texts and the tests'), whose tests check that every query holding placeholders
//! prepares and returns exactly their columns, and that no placeholder of `sql/` and no
//! declaration is missing there.
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

/// Every row declaration of the store: its placeholder, select list and column count, for
/// what expands a query's text without `row_sql!` (PostgreSQL's query texts,
/// `store::postgres::queries`, and the tests). `tests/it/store.rs` fails when a declaration of
/// `src/store` or a placeholder of `sql/` is missing here.
pub const ROWS: &[(&str, &str, usize)] = {
    macro_rules! rows {
        ($($row:path),+ $(,)?) => {
            &[$({
                use $row as row;
                (row::PLACEHOLDER, row::SELECT, row::COUNT)
            }),+]
        };
    }
    use crate::store::*;
    rows![
        batch_col,
        migration_col,
        attention::col,
        status::col,
        threads::col,
        agents::col,
        workers::col,
        top::col,
        adopt::candidate_col,
        adopt::place_col,
        adopt::spend_col,
        adopt::target_col,
        agents::mailbox::notice_col,
        agents::mailbox::steer_col,
        agents::last_outcome_col,
        agents::owned_col,
        agents::settled_col,
        agents::stop_target_col,
        agents::upsert_col,
        agents::reap::reaped_col,
        agents::reap::registry_col,
        agents::recap::held_col,
        agents::timers::due_col,
        check::closed_without_exit_col,
        check::counts_col,
        check::duplicate_path_col,
        check::event_order_col,
        check::last_seq_col,
        check::live_thread_col,
        check::orphan_events_col,
        check::owners_col,
        budgets::budget_col,
        worktrees::col,
        worktrees::thread_col,
        facts::col,
        hosts::host_col,
        hosts::unreachable_col,
        check::parent_link_col,
        check::path_shape_col,
        check::stale_command_col,
        check::stale_mailbox_col,
        check::usage_rows_col,
        check::usage_totals_col,
        commands::pending_col,
        commands::status_col,
        commands::stop_candidate_col,
        commands::stop_outcome_col,
        events::col,
        forest::manager_col,
        forest::place_col,
        list::listed_col,
        mailbox::notice_col,
        notices::facts_col,
        output::col,
        output::stderr_col,
        questions::col,
        questions::parent_col,
        queue::position_col,
        queue::state_col,
        queue::waiting_col,
        queue::yield_col,
        refs::elsewhere_col,
        reports::col,
        restore::candidate_col,
        restore::unlaunched_col,
        sessions::manager_root_col,
        sessions::root_col,
        sessions::root_manager_col,
        sessions::thread_managers_col,
        sessions::thread_sessions_col,
        threads::holder_col,
        threads::idle_col,
        threads::manager_col,
        threads::owner_col,
        top::place_col,
        usage::below_thread_col,
        usage::col,
        usage::place_col,
        usage::session_col,
        usage::spend_col,
        usage::subtree_col,
        usage::thread_col,
        usage::tree_col,
        usage::tree_of_col,
        usage::tree_row_col,
        web::col,
        web::command_col,
        web::count_col,
        web::totals_col,
        web::sent_col,
        web::need_col,
        web::timeline_col,
        workers::activity_col,
        workers::identity_col,
        workers::keyed_col,
        workers::model_source_col,
        workers::pending_col,
        workers::run_marks_col,
    ]
};

/// `sql` with every declared row's placeholder replaced by its select list.
pub fn expand_all(sql: &str) -> String {
    ROWS.iter()
        .fold(sql.to_owned(), |sql, (placeholder, select, _)| {
            sql.replace(placeholder, select)
        })
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

    /// `expand_all` gives what `row_sql!` gives for a query of several placeholders, whatever
    /// their order in `ROWS`: each placeholder is listed once and no select list holds one.
    #[test]
    fn every_row_is_listed_once_and_expands_as_the_store_does() {
        let mut placeholders: Vec<&str> = super::ROWS.iter().map(|(p, _, _)| *p).collect();
        placeholders.sort_unstable();
        placeholders.dedup();
        assert_eq!(
            placeholders.len(),
            super::ROWS.len(),
            "a row is listed twice"
        );
        for (placeholder, select, count) in super::ROWS {
            assert!(placeholder.starts_with('{') && placeholder.ends_with("_row}"));
            assert!(!select.contains('{') && *count > 0, "{placeholder}");
        }
        use crate::store::{batch_col, output, reports, workers};
        assert_eq!(
            super::expand_all(include_str!("../../sql/workers_of_coordinators.sql")),
            row_sql!("workers_of_coordinators", workers::col, reports::col)
        );
        assert_eq!(
            super::expand_all(include_str!("../../sql/outputs_of_threads.sql")),
            row_sql!("outputs_of_threads", batch_col, output::col)
        );
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
