//! A SQLite connection as the store's backend ([`Db`]): a query of `sql/` prepared once per
//! connection (its statement cache), the store's values bound to it, and its rows read as
//! [`Cell`]s.

use std::borrow::Cow;

use rusqlite::types::{ToSqlOutput, ValueRef};

use crate::error::Result;
use crate::store::db::{Cell, Cells, Db, Params, Query, Row, ToParam, Value};

impl Cells for rusqlite::Row<'_> {
    fn cell(&self, i: usize) -> Result<std::result::Result<Cell<'_>, String>> {
        Ok(Ok(match self.get_ref(i)? {
            ValueRef::Null => Cell::Null,
            ValueRef::Integer(v) => Cell::Int(v),
            ValueRef::Real(v) => Cell::Real(v),
            ValueRef::Text(t) => match std::str::from_utf8(t) {
                Ok(t) => Cell::Text(t),
                Err(e) => return Ok(Err(format!("text that is not UTF-8 ({e})"))),
            },
            ValueRef::Blob(b) => Cell::Blob(b),
        }))
    }
}

struct Bound<'a>(&'a dyn ToParam);

impl rusqlite::ToSql for Bound<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0.value() {
            Value::Null => ToSqlOutput::Owned(rusqlite::types::Value::Null),
            Value::Int(v) => ToSqlOutput::Owned(rusqlite::types::Value::Integer(v)),
            Value::Real(v) => ToSqlOutput::Owned(rusqlite::types::Value::Real(v)),
            Value::Text(Cow::Borrowed(t)) => ToSqlOutput::Borrowed(ValueRef::Text(t.as_bytes())),
            Value::Text(Cow::Owned(t)) => ToSqlOutput::Owned(rusqlite::types::Value::Text(t)),
            Value::Blob(Cow::Borrowed(b)) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
            Value::Blob(Cow::Owned(b)) => ToSqlOutput::Owned(rusqlite::types::Value::Blob(b)),
        })
    }
}

/// Binds `p` to `stmt`, refusing a count or a name the statement does not have.
fn bind(stmt: &mut rusqlite::Statement<'_>, q: &Query, p: Params<'_>) -> Result<()> {
    let expected = stmt.parameter_count();
    let wrong_count = |given: usize| q.wrong_count(expected, given);
    match p {
        Params::At(values) => {
            if values.len() != expected {
                return Err(wrong_count(values.len()));
            }
            for (i, v) in values.iter().enumerate() {
                stmt.raw_bind_parameter(i + 1, Bound(*v))?;
            }
        }
        Params::IfUsed(values) => {
            for (name, v) in values {
                if let Some(i) = stmt.parameter_index(name)? {
                    stmt.raw_bind_parameter(i, Bound(*v))?;
                }
            }
        }
        Params::Named(values) => {
            if values.len() != expected {
                return Err(wrong_count(values.len()));
            }
            for (name, v) in values {
                let Some(i) = stmt.parameter_index(name)? else {
                    return Err(q.no_parameter(name));
                };
                stmt.raw_bind_parameter(i, Bound(*v))?;
            }
        }
    }
    Ok(())
}

impl Db for rusqlite::Connection {
    fn each(
        &self,
        q: &Query,
        p: Params<'_>,
        f: &mut dyn FnMut(&Row<'_>) -> Result<bool>,
    ) -> Result<()> {
        let mut stmt = self.prepare_cached((q.sqlite)())?;
        bind(&mut stmt, q, p)?;
        let mut rows = stmt.raw_query();
        while let Some(r) = rows.next()? {
            if !f(&Row::new(r, q.name))? {
                break;
            }
        }
        Ok(())
    }

    fn execute(&self, q: &Query, p: Params<'_>) -> Result<usize> {
        let mut stmt = self.prepare_cached((q.sqlite)())?;
        bind(&mut stmt, q, p)?;
        Ok(stmt.raw_execute()?)
    }

    fn batch(&self, sql: &str) -> Result<()> {
        Ok(self.execute_batch(sql)?)
    }

    fn begin_read(&self) -> Result<()> {
        self.prepare_cached("BEGIN DEFERRED")?.execute([])?;
        Ok(())
    }

    fn end_read(&self) {
        // Nothing was written: ending a read transaction cannot lose anything.
        let ended = self
            .prepare_cached("COMMIT")
            .and_then(|mut s| s.execute([]));
        if ended.is_err() && !self.is_autocommit() {
            let _ = self.execute_batch("ROLLBACK");
        }
    }

    fn sqlite(&self) -> Option<&rusqlite::Connection> {
        Some(self)
    }

    fn change_count(&self) -> Result<i64> {
        // Cached: a serve's answers read it before every kept answer (engine/cache.rs).
        Ok(self
            .prepare_cached("PRAGMA data_version")?
            .query_row([], |r| r.get(0))?)
    }

    fn advisory_lock(&self, _keys: (i32, i32)) -> Result<()> {
        Ok(())
    }

    fn query_values(&self, sql: &str) -> Result<(Vec<String>, Vec<Vec<Value<'static>>>)> {
        let mut stmt = self.prepare(sql)?;
        let names: Vec<String> = stmt.column_names().iter().map(|n| n.to_string()).collect();
        let mut rows = stmt.raw_query();
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let row = Row::new(r, "adhoc");
            out.push(
                (0..names.len())
                    .map(|i| row.get::<Value<'static>>(i))
                    .collect::<Result<Vec<_>>>()?,
            );
        }
        Ok((names, out))
    }
}
