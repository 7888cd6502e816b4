//! The store's one way to run a query, whichever database holds the rows.
//!
//! A store function names its query with [`q!`] (the file of `sql/`, and the rows whose
//! placeholders it writes), binds its values with [`params!`] (by position) or [`named!`] (by
//! `:name`), and reads each row through [`Row::get`] by the position its row declaration gives
//! (`store::rows`). [`Conn`](super::Conn) runs it on the backend it holds: [`Db`] is what a
//! backend implements (SQLite's in `store/sqlite`, PostgreSQL's in `store/postgres`), and the
//! values cross it as [`Value`] (a parameter) and [`Cell`] (a column of a row), so no store
//! function sees a backend's types. A query's text for each backend is made once: SQLite's
//! from `sql/NAME.sql` with its rows expanded, PostgreSQL's from its override if it has one,
//! with the parameters rewritten to `$N` (`store::postgres::queries`).

use std::borrow::Cow;
use std::sync::OnceLock;

use crate::error::{Error, Result};

/// A query of `sql/`: its name (the file's, without `.sql`) and its SQLite text with the row
/// placeholders expanded. Made by [`q!`], once per query, as a `static`.
pub struct Query {
    pub name: &'static str,
    /// SQLite's text (expanded at its first use).
    pub sqlite: fn() -> &'static str,
    /// PostgreSQL's text and parameter names, made at its first use on PostgreSQL.
    pub postgres: OnceLock<super::postgres::params::Positional>,
}

impl Query {
    /// The error of a call that binds `given` values where the statement takes `expected`.
    pub(in crate::store) fn wrong_count(&self, expected: usize, given: usize) -> Error {
        Error::internal(format!(
            "sql/{}.sql takes {expected} parameters but was given {given}. Repair: this is a bug in threadbase; report it with the command that failed.",
            self.name
        ))
    }

    /// The error of a call that binds a name the statement does not have.
    pub(in crate::store) fn no_parameter(&self, name: &str) -> Error {
        Error::internal(format!(
            "sql/{}.sql has no parameter {name}. Repair: this is a bug in threadbase; report it with the command that failed.",
            self.name
        ))
    }
}

impl std::fmt::Debug for Query {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sql/{}.sql", self.name)
    }
}

/// `q!("name")`: the query `sql/name.sql`; `q!("name", rows::col, …)`: the same with the
/// placeholders of those row declarations expanded (in the order the query writes them).
macro_rules! q {
    ($name:literal) => {{
        static Q: $crate::store::db::Query = $crate::store::db::Query {
            name: $name,
            sqlite: || include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/sql/", $name, ".sql")),
            postgres: std::sync::OnceLock::new(),
        };
        &Q
    }};
    ($name:literal, $($row:path),+ $(,)?) => {{
        static Q: $crate::store::db::Query = $crate::store::db::Query {
            name: $name,
            sqlite: || $crate::store::rows::row_sql!($name, $($row),+),
            postgres: std::sync::OnceLock::new(),
        };
        &Q
    }};
}

/// A value bound to a parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(Cow<'a, str>),
    Blob(Cow<'a, [u8]>),
}

impl Value<'_> {
    /// The value as a row's cell.
    pub fn cell(&self) -> Cell<'_> {
        match self {
            Value::Null => Cell::Null,
            Value::Int(v) => Cell::Int(*v),
            Value::Real(v) => Cell::Real(*v),
            Value::Text(t) => Cell::Text(t),
            Value::Blob(b) => Cell::Blob(b),
        }
    }
}

/// What can be bound to a parameter (the store's own [`Value`], so either backend binds it).
pub trait ToParam {
    fn value(&self) -> Value<'_>;
}

/// The values of a query's parameters: by position (`?1`, `?`), or by name (`:id`).
#[derive(Clone, Copy)]
pub enum Params<'a> {
    At(&'a [&'a dyn ToParam]),
    Named(&'a [(&'static str, &'a dyn ToParam)]),
    /// By name, each bound only if the statement names it (one set of values for several
    /// statements that each use some of them: the list's).
    IfUsed(&'a [(&'static str, &'a dyn ToParam)]),
}

/// `params![a, b]`: the values of `?1`, `?2`.
macro_rules! params {
    ($($p:expr),* $(,)?) => {
        $crate::store::db::Params::At(&[$(&$p as &dyn $crate::store::db::ToParam),*])
    };
}

/// `named!{":a": a, ":b": b}`: the values of `:a` and `:b`.
macro_rules! named {
    ($($name:literal : $p:expr),* $(,)?) => {
        $crate::store::db::Params::Named(&[$(($name, &$p as &dyn $crate::store::db::ToParam)),*])
    };
}

pub(crate) use {named, params, q};

/// A column's value in a row, as read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

impl Cell<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Cell::Null => "NULL",
            Cell::Int(_) => "an integer",
            Cell::Real(_) => "a real",
            Cell::Text(_) => "text",
            Cell::Blob(_) => "a blob",
        }
    }
}

/// What can be read from a column: `Err` says what the column held instead.
pub trait FromCell: Sized {
    fn from_cell(cell: Cell<'_>) -> std::result::Result<Self, String>;
}

/// The error of a cell that is not what its reader wants.
pub fn wrong(cell: Cell<'_>, wanted: &str) -> String {
    format!("expected {wanted}, found {}", cell.kind())
}

/// One row of a query's answer: its cells as its backend reads them ([`Cells`]).
pub struct Row<'a> {
    of: &'a dyn Cells,
    query: &'a str,
}

/// A row's cells as a backend holds them: `Ok(Err(why))` when the cell at `i` cannot be read
/// as a [`Cell`], `Err` when the backend failed.
pub(in crate::store) trait Cells {
    fn cell(&self, i: usize) -> Result<std::result::Result<Cell<'_>, String>>;
}

/// Cells already read (PostgreSQL's rows, a list's rows read whole).
impl Cells for &[Cell<'_>] {
    fn cell(&self, i: usize) -> Result<std::result::Result<Cell<'_>, String>> {
        Ok(self
            .get(i)
            .copied()
            .ok_or_else(|| format!("no such column (the row has {})", self.len())))
    }
}

impl<'a> Row<'a> {
    /// The row `of` holds, of the query named `query`.
    pub(in crate::store) fn new(of: &'a dyn Cells, query: &'a str) -> Row<'a> {
        Row { of, query }
    }

    /// The cell at position `i`, as it was read.
    pub fn cell(&self, i: usize) -> Result<Cell<'_>> {
        self.of.cell(i)?.map_err(|why| self.unreadable(i, &why))
    }

    /// The value of the column at position `i`.
    pub fn get<T: FromCell>(&self, i: usize) -> Result<T> {
        T::from_cell(self.cell(i)?).map_err(|why| self.unreadable(i, &why))
    }

    /// The error of column `i` that holds what its reader cannot read (`why`).
    pub fn unreadable(&self, i: usize, why: &str) -> Error {
        Error::internal(format!(
            "Column {i} of a row of sql/{}.sql could not be read: {why}. Repair: run `threadbase check` on the database; a row written by a newer threadbase needs that version.",
            self.query
        ))
    }
}

/// The error a query that must return a row gives when it returns none (the same as SQLite's
/// `query_row`, so callers that tell "no row" apart keep working).
pub fn no_row() -> Error {
    super::sqlite::no_row()
}

/// What a backend does: run a query of `sql/` (rows, or a count of changed rows), and a
/// statement of its own (ad hoc SQL). `each`'s callback returns `false` to stop early.
pub(in crate::store) trait Db {
    fn each(
        &self,
        q: &Query,
        p: Params<'_>,
        f: &mut dyn FnMut(&Row<'_>) -> Result<bool>,
    ) -> Result<()>;
    fn execute(&self, q: &Query, p: Params<'_>) -> Result<usize>;
    /// Runs a statement that is not a query of `sql/` (rows ignored).
    fn batch(&self, sql: &str) -> Result<()>;
    /// Starts and ends a read transaction (one snapshot for several queries).
    fn begin_read(&self) -> Result<()>;
    fn end_read(&self);
    /// The SQLite connection, when the backend is SQLite (its own chores: the WAL, the page
    /// cache, its checks); `None` on another backend, which has no such chores.
    fn sqlite(&self) -> Option<&super::sqlite::Connection> {
        None
    }
    /// Runs one statement that is not a query of `sql/` (no parameters): its columns' names
    /// and every row's values (`threadbase sql`, the tests' checks).
    fn query_values(&self, sql: &str) -> Result<(Vec<String>, Vec<Vec<Value<'static>>>)>;
    /// A counter that moves whenever another connection commits (SQLite's
    /// `PRAGMA data_version`; the change notifications a PostgreSQL connection listens to).
    fn change_count(&self) -> Result<i64>;
    /// Takes a transaction-level advisory lock on the keys (PostgreSQL); nothing on SQLite,
    /// whose every write holds the whole file.
    fn advisory_lock(&self, keys: (i32, i32)) -> Result<()>;
    /// [`Db::change_count`] without the announcements of children's facts alone: what moves
    /// when a command, notice or thread state may have (PostgreSQL). `None` where commits are
    /// not told apart (SQLite: every commit may have).
    fn rows_change_count(&self) -> Result<Option<i64>> {
        Ok(None)
    }
    /// Asks that this write transaction be announced with its commit even where it would be
    /// announced later (PostgreSQL's facts writes); nothing on SQLite.
    fn announce_now(&self) {}
}

// ---- values -----------------------------------------------------------------------------------

impl<T: ToParam + ?Sized> ToParam for &T {
    fn value(&self) -> Value<'_> {
        (**self).value()
    }
}

impl<T: ToParam> ToParam for Option<T> {
    fn value(&self) -> Value<'_> {
        match self {
            Some(v) => v.value(),
            None => Value::Null,
        }
    }
}

macro_rules! int_param {
    ($($t:ty),+) => {$(
        impl ToParam for $t {
            fn value(&self) -> Value<'_> {
                Value::Int(*self as i64)
            }
        }

        impl FromCell for $t {
            fn from_cell(cell: Cell<'_>) -> std::result::Result<Self, String> {
                match cell {
                    Cell::Int(v) => <$t>::try_from(v)
                        .map_err(|_| format!("{v} is out of range for {}", stringify!($t))),
                    other => Err(wrong(other, "an integer")),
                }
            }
        }
    )+};
}

int_param!(i64, i32, u32, u16, u8, usize, u64);

impl ToParam for bool {
    fn value(&self) -> Value<'_> {
        Value::Int(*self as i64)
    }
}

impl FromCell for bool {
    fn from_cell(cell: Cell<'_>) -> std::result::Result<Self, String> {
        match cell {
            Cell::Int(v) => Ok(v != 0),
            other => Err(wrong(other, "an integer (a flag)")),
        }
    }
}

impl ToParam for f64 {
    fn value(&self) -> Value<'_> {
        Value::Real(*self)
    }
}

impl FromCell for f64 {
    fn from_cell(cell: Cell<'_>) -> std::result::Result<Self, String> {
        match cell {
            Cell::Real(v) => Ok(v),
            Cell::Int(v) => Ok(v as f64),
            other => Err(wrong(other, "a number")),
        }
    }
}

impl ToParam for str {
    fn value(&self) -> Value<'_> {
        Value::Text(Cow::Borrowed(self))
    }
}

impl ToParam for String {
    fn value(&self) -> Value<'_> {
        Value::Text(Cow::Borrowed(self))
    }
}

impl FromCell for String {
    fn from_cell(cell: Cell<'_>) -> std::result::Result<Self, String> {
        match cell {
            Cell::Text(t) => Ok(t.to_owned()),
            other => Err(wrong(other, "text")),
        }
    }
}

impl ToParam for [u8] {
    fn value(&self) -> Value<'_> {
        Value::Blob(Cow::Borrowed(self))
    }
}

impl ToParam for Vec<u8> {
    fn value(&self) -> Value<'_> {
        Value::Blob(Cow::Borrowed(self))
    }
}

impl FromCell for Vec<u8> {
    fn from_cell(cell: Cell<'_>) -> std::result::Result<Self, String> {
        match cell {
            Cell::Blob(b) => Ok(b.to_vec()),
            Cell::Text(t) => Ok(t.as_bytes().to_vec()),
            other => Err(wrong(other, "a blob")),
        }
    }
}

impl<T: FromCell> FromCell for Option<T> {
    fn from_cell(cell: Cell<'_>) -> std::result::Result<Self, String> {
        match cell {
            Cell::Null => Ok(None),
            other => T::from_cell(other).map(Some),
        }
    }
}

impl ToParam for Value<'_> {
    fn value(&self) -> Value<'_> {
        match self {
            Value::Text(t) => Value::Text(Cow::Borrowed(t)),
            Value::Blob(b) => Value::Blob(Cow::Borrowed(b)),
            Value::Null => Value::Null,
            Value::Int(v) => Value::Int(*v),
            Value::Real(v) => Value::Real(*v),
        }
    }
}

/// A cell as an owned value (what `threadbase sql` and the tests print).
impl FromCell for Value<'static> {
    fn from_cell(cell: Cell<'_>) -> std::result::Result<Self, String> {
        Ok(match cell {
            Cell::Null => Value::Null,
            Cell::Int(v) => Value::Int(v),
            Cell::Real(v) => Value::Real(v),
            Cell::Text(t) => Value::Text(Cow::Owned(t.to_owned())),
            Cell::Blob(b) => Value::Blob(Cow::Owned(b.to_vec())),
        })
    }
}
