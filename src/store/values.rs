//! How the ground's values are stored: each state enum of [`crate::domain`] as the word its
//! column's `CHECK` admits, a [`ThreadId`] as its text, a [`ManagerId`] as its integer. The one
//! place those types meet SQLite, so `domain` knows nothing of the database (a second backend
//! adds its own conversions here, beside these).

use std::borrow::Cow;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

use crate::store::db::{wrong, Cell, FromCell, ToParam, Value};

use crate::domain::{
    AgentState, Attention, CommandKind, CommandState, Contract, Direction, ExitKind, MailKind,
    MailState, ManagerId, Outcome, Phase, QuestionKind, QuestionState, SessionId, ThreadId,
    ThreadStatus, WorkerId,
};

/// `ToSql` and `FromSql` (rusqlite's, for the tests' own SQL) and `ToParam` and `FromCell` (the
/// store's, on either backend) for enums of words: written as the word, read back only as one of the
/// enum's words (anything else is an error naming the words it may be).
macro_rules! stored_as_words {
    ($($name:ident),+) => {$(
        impl ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }

        impl FromSql for $name {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                let word = String::from_utf8_lossy(value.as_bytes()?);
                $name::from_cell(Cell::Text(&word)).map_err(|why| FromSqlError::Other(why.into()))
            }
        }

        impl ToParam for $name {
            fn value(&self) -> Value<'_> {
                Value::Text(Cow::Borrowed(self.as_str()))
            }
        }

        impl FromCell for $name {
            fn from_cell(cell: Cell<'_>) -> std::result::Result<Self, String> {
                match cell {
                    Cell::Text(word) => $name::parse(word).ok_or_else(|| {
                        format!(
                            "{} is not a {} (one of {:?})",
                            word,
                            stringify!($name),
                            $name::ALL.iter().map(|v| v.as_str()).collect::<Vec<_>>()
                        )
                    }),
                    other => Err(wrong(other, concat!("a ", stringify!($name)))),
                }
            }
        }
    )+};
}

stored_as_words!(
    Contract,
    ThreadStatus,
    Phase,
    AgentState,
    ExitKind,
    Outcome,
    CommandKind,
    CommandState,
    MailState,
    Direction,
    MailKind,
    QuestionKind,
    QuestionState,
    Attention
);

/// Text ids: written and read as their text (rusqlite's traits and the store's).
macro_rules! stored_as_text {
    ($($name:ident),+) => {$(
        impl ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
                Ok(ToSqlOutput::from(self.as_str()))
            }
        }

        impl FromSql for $name {
            fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
                String::column_result(value).map($name::from)
            }
        }

        impl ToParam for $name {
            fn value(&self) -> Value<'_> {
                Value::Text(Cow::Borrowed(self.as_str()))
            }
        }

        impl FromCell for $name {
            fn from_cell(cell: Cell<'_>) -> std::result::Result<Self, String> {
                String::from_cell(cell).map($name::from)
            }
        }
    )+};
}

stored_as_text!(ThreadId, SessionId, WorkerId);

impl ToSql for ManagerId {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        self.0.to_sql()
    }
}

impl FromSql for ManagerId {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        i64::column_result(value).map(ManagerId)
    }
}

/// A batch of thread ids bound as one parameter: the JSON array text that `json_each` reads
/// (`sql/*_of_threads.sql`), made once for the batch's several queries; each answer is by
/// position in the batch.
#[derive(Debug, Clone)]
pub struct ThreadIds {
    json: String,
    len: usize,
}

impl ThreadIds {
    pub fn new<'a>(ids: impl IntoIterator<Item = &'a ThreadId>) -> crate::error::Result<Self> {
        let ids: Vec<&ThreadId> = ids.into_iter().collect();
        Ok(ThreadIds {
            json: serde_json::to_string(&ids)?,
            len: ids.len(),
        })
    }

    /// How many ids the batch holds.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl ToSql for ThreadIds {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.json.as_str()))
    }
}

// ---- the store's own query layer (`store::db`), on either backend -------------------------

impl ToParam for ManagerId {
    fn value(&self) -> Value<'_> {
        Value::Int(self.0)
    }
}

impl FromCell for ManagerId {
    fn from_cell(cell: Cell<'_>) -> std::result::Result<Self, String> {
        i64::from_cell(cell).map(ManagerId)
    }
}

impl ToParam for ThreadIds {
    fn value(&self) -> Value<'_> {
        Value::Text(Cow::Borrowed(self.json.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::Connection;
    use std::fmt;

    /// Each enum's words are exactly the words the schema's CHECK constraint admits: every
    /// value round-trips through a real column, and a word outside the set is refused.
    #[test]
    fn every_word_round_trips_through_a_checked_column() {
        let conn = Connection::open_in_memory().unwrap();
        fn round_trip<T>(conn: &Connection, all: &[T])
        where
            T: ToSql + FromSql + PartialEq + fmt::Debug + Copy,
        {
            for v in all {
                let back: T = conn.query_row("SELECT ?1", [v], |r| r.get(0)).unwrap();
                assert_eq!(&back, v);
            }
            let refused = conn.query_row("SELECT 'nonsense'", [], |r| r.get::<_, T>(0));
            assert!(refused.is_err(), "a word outside the set reads as an error");
        }
        round_trip(&conn, Contract::ALL);
        round_trip(&conn, ThreadStatus::ALL);
        round_trip(&conn, Phase::ALL);
        round_trip(&conn, AgentState::ALL);
        round_trip(&conn, ExitKind::ALL);
        round_trip(&conn, Outcome::ALL);
        round_trip(&conn, CommandKind::ALL);
        round_trip(&conn, CommandState::ALL);
        round_trip(&conn, Direction::ALL);
        round_trip(&conn, MailKind::ALL);
        round_trip(&conn, MailState::ALL);
    }
}
