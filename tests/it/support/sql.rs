//! A test's own SQL against its database, whichever backend holds it (a SQLite file, or a
//! PostgreSQL schema on a `THREADBASE_TEST_BACKEND=postgres` run): reads through a read-only
//! connection ([`values`], [`count`], the [`Conn`] and [`Rusqlite`] call shapes), writes in one transaction of the store
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

/// Runs `sql` (statements without rows) in one write transaction; the database's refusal as
/// text.
pub fn try_exec(db: &Path, sql: &str) -> Result<(), String> {
    let store = threadbase::Store::open(db).map_err(|e| e.to_string())?;
    store
        .write(|tx| tx.execute_script(sql))
        .map_err(|e| e.to_string())
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

/// A value as JSON (a blob as `"<blob>"`), for tests that compare rows as JSON.
pub fn json(v: Value<'static>) -> serde_json::Value {
    match v {
        Value::Null => serde_json::Value::Null,
        Value::Int(x) => x.into(),
        Value::Real(x) => x.into(),
        Value::Text(t) => t.into_owned().into(),
        Value::Blob(_) => "<blob>".into(),
    }
}

/// A stand-in for `rusqlite::Connection` that works on either backend, for the tests' own
/// reads and writes: the same call shapes (`query_row(sql, params, |r| r.get(0))`,
/// `prepare(sql)?.query_map(params, f)`, `execute(sql, params)`), each statement run with its
/// parameters written in as literals (the tests' own values) through [`values`] or [`exec`].
pub struct Conn {
    db: std::path::PathBuf,
}

/// One row of a [`Conn`] query, read by position as rusqlite's rows are.
pub struct Row(Vec<Value<'static>>);

/// A column position as the tests write it (`r.get(0)`).
pub trait Index {
    fn at(self) -> usize;
}

impl Index for usize {
    fn at(self) -> usize {
        self
    }
}

impl Row {
    pub fn get<I: Index, T: threadbase::store::db::FromCell>(&self, i: I) -> rusqlite::Result<T> {
        let i = i.at();
        let cell = self
            .0
            .get(i)
            .ok_or(rusqlite::Error::InvalidColumnIndex(i))?
            .cell();
        T::from_cell(cell).map_err(|why| {
            rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Null, why.into())
        })
    }
}

/// The values bound to a statement, written in as SQL literals.
pub trait Bind {
    fn literals(&self) -> Vec<String>;
}

fn literal(v: &dyn rusqlite::ToSql) -> String {
    use rusqlite::types::{ToSqlOutput, Value as V, ValueRef as R};
    let owned;
    let r = match v.to_sql().expect("a bindable value") {
        ToSqlOutput::Borrowed(r) => r,
        ToSqlOutput::Owned(o) => {
            owned = o;
            match &owned {
                V::Null => R::Null,
                V::Integer(i) => R::Integer(*i),
                V::Real(x) => R::Real(*x),
                V::Text(t) => R::Text(t.as_bytes()),
                V::Blob(b) => R::Blob(b),
            }
        }
        other => panic!("an unsupported binding: {other:?}"),
    };
    match r {
        R::Null => "NULL".into(),
        R::Integer(i) => i.to_string(),
        R::Real(x) => format!("{x:?}"),
        R::Text(t) => lit(&String::from_utf8_lossy(t)),
        R::Blob(_) => panic!("a blob parameter in a test's SQL"),
    }
}

impl Bind for () {
    fn literals(&self) -> Vec<String> {
        Vec::new()
    }
}

impl<T: Bind + ?Sized> Bind for &T {
    fn literals(&self) -> Vec<String> {
        (**self).literals()
    }
}

impl Bind for [&dyn rusqlite::ToSql] {
    fn literals(&self) -> Vec<String> {
        self.iter().map(|v| literal(*v)).collect()
    }
}

impl<T: rusqlite::ToSql, const N: usize> Bind for [T; N] {
    fn literals(&self) -> Vec<String> {
        self.iter().map(|v| literal(v)).collect()
    }
}

impl<A: rusqlite::ToSql, B: rusqlite::ToSql> Bind for (A, B) {
    fn literals(&self) -> Vec<String> {
        vec![literal(&self.0), literal(&self.1)]
    }
}

impl<A: rusqlite::ToSql, B: rusqlite::ToSql, C: rusqlite::ToSql> Bind for (A, B, C) {
    fn literals(&self) -> Vec<String> {
        vec![literal(&self.0), literal(&self.1), literal(&self.2)]
    }
}

/// `sql` with its parameters (`?N`, `?`) written in as the literals of `params`: a statement for
/// [`exec`] or `Conn::execute_script`.
pub fn with<P: Bind>(sql: &str, params: P) -> String {
    bound(sql, &params.literals())
}

/// `sql` with `?N` (and bare `?`, in order) replaced by `values`; quoted text is left alone.
fn bound(sql: &str, values: &[String]) -> String {
    let (mut out, mut next, mut quoted) = (String::new(), 0usize, false);
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\'' {
            quoted = !quoted;
        }
        if c != '?' || quoted {
            out.push(c);
            continue;
        }
        let mut digits = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        let at = if digits.is_empty() {
            next += 1;
            next
        } else {
            digits.parse().unwrap()
        };
        out.push_str(&values[at - 1]);
    }
    out
}

/// Where a [`Conn`]-shaped call runs its SQL: a database named by path (each statement opens
/// its own connection), or one of the store's connections (`threadbase::store::Conn`: a
/// reader, or the transaction of `Store::write`).
pub trait Source {
    fn read(&self, sql: &str) -> Vec<Vec<Value<'static>>>;
    fn write(&self, sql: &str);
}

impl Source for Conn {
    fn read(&self, sql: &str) -> Vec<Vec<Value<'static>>> {
        values(&self.db, sql)
    }

    fn write(&self, sql: &str) {
        exec(&self.db, sql)
    }
}

impl Source for threadbase::store::Conn {
    fn read(&self, sql: &str) -> Vec<Vec<Value<'static>>> {
        self.query_values(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .1
    }

    fn write(&self, sql: &str) {
        self.execute_script(sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    }
}

/// rusqlite's call shapes on any [`Source`]: `conn.query_row(sql, params, |r| r.get(0))`,
/// `conn.prepare(sql)?.query_map(params, f)`, `conn.execute_batch(sql)`.
pub trait Rusqlite: Source {
    fn query_row<T, P: Bind>(
        &self,
        sql: &str,
        params: P,
        f: impl FnOnce(&Row) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        match self
            .read(&bound(sql, &params.literals()))
            .into_iter()
            .next()
        {
            Some(r) => f(&Row(r)),
            None => Err(rusqlite::Error::QueryReturnedNoRows),
        }
    }

    fn prepare(&self, sql: &str) -> rusqlite::Result<Statement<'_, Self>> {
        Ok(Statement {
            conn: self,
            sql: sql.to_owned(),
        })
    }

    fn execute_batch(&self, sql: &str) -> rusqlite::Result<()> {
        self.write(sql);
        Ok(())
    }
}

impl<S: Source + ?Sized> Rusqlite for S {}

impl Conn {
    pub fn open(db: &Path) -> rusqlite::Result<Conn> {
        Ok(Conn {
            db: db.to_path_buf(),
        })
    }

    /// Accepted for the call shape; each statement opens its own connection.
    pub fn busy_timeout(&self, _: std::time::Duration) -> rusqlite::Result<()> {
        Ok(())
    }

    pub fn execute<P: Bind>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        exec(&self.db, &bound(sql, &params.literals()));
        Ok(0)
    }

    pub fn query_row<T, P: Bind>(
        &self,
        sql: &str,
        params: P,
        f: impl FnOnce(&Row) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        Rusqlite::query_row(self, sql, params, f)
    }

    pub fn prepare(&self, sql: &str) -> rusqlite::Result<Statement<'_, Conn>> {
        Rusqlite::prepare(self, sql)
    }

    /// Runs `sql` in one transaction; a statement the database refuses is an error (its
    /// message), not a panic.
    pub fn execute_batch(&self, sql: &str) -> rusqlite::Result<()> {
        try_exec(&self.db, sql).map_err(|e| rusqlite::Error::ToSqlConversionFailure(e.into()))
    }
}

/// A statement of a [`Rusqlite`] source.
pub struct Statement<'c, S: Source + ?Sized> {
    conn: &'c S,
    sql: String,
}

impl<S: Source + ?Sized> Statement<'_, S> {
    pub fn query_map<T, P: Bind>(
        &mut self,
        params: P,
        mut f: impl FnMut(&Row) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<std::vec::IntoIter<rusqlite::Result<T>>> {
        let rows: Vec<rusqlite::Result<T>> = self
            .conn
            .read(&bound(&self.sql, &params.literals()))
            .into_iter()
            .map(|r| f(&Row(r)))
            .collect();
        Ok(rows.into_iter())
    }
}
