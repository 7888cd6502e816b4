//! `thread_snapshots` (migration V8): closed threads' rendered answers. The store keeps and
//! finds the bytes; what they say is the engine's business. Rows are only read for this
//! build's [`SHAPE`], so a different build's rendering is never served.

use crate::store::Conn;
use rusqlite::types::{ToSql, ToSqlOutput};
use rusqlite::OptionalExtension;

use crate::domain::ThreadId;
use crate::error::Result;

/// This build's rendering (see build.rs): cache rows of any other shape are ignored.
pub const SHAPE: &str = env!("THREADBASE_SHAPE");

/// What a cached row holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum View {
    /// A `ThreadRuntimeSnapshot`'s JSON (a list's element).
    Snapshot,
    /// A poll's whole result JSON.
    Poll,
}

impl View {
    pub fn as_str(self) -> &'static str {
        match self {
            View::Snapshot => "snapshot",
            View::Poll => "poll",
        }
    }
}

impl ToSql for View {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

/// A kept view's JSON and, for a snapshot, the thread's list line. (A list reads both with
/// its rows: `sql/list_*.sql`.)
pub type Cached = (String, Option<String>);

crate::store::rows::columns! {
    /// A kept view (`{kept_row}` in `sql/snapshot_cached.sql`, which reads
    /// `thread_snapshots`): what [`Cached`] holds, read by [`cached`].
    pub mod kept_col as "{kept_row}" {
        JSON = "json",
        LINE = "line",
    }
}

/// One thread's cached `view` at `detail`, if this build rendered it.
pub fn cached(conn: &Conn, id: &ThreadId, view: View, detail: &str) -> Result<Option<Cached>> {
    Ok(conn
        .db()
        .prepare_cached(crate::store::rows::row_sql!("snapshot_cached", kept_col))?
        .query_row((id, view, detail, SHAPE), |r| {
            Ok((r.get(kept_col::JSON)?, r.get(kept_col::LINE)?))
        })
        .optional()?)
}

/// Keeps `json` (and its list `line`) as thread `id`'s `view` at `detail`, if the thread is
/// closed. Call it inside
/// the write transaction that rendered `json` from the rows: then no change can come between
/// the reading and the keeping, and every later change deletes the row (V8's triggers).
/// Returns whether it was kept.
pub fn put(
    conn: &Conn,
    id: &ThreadId,
    view: View,
    detail: &str,
    json: &str,
    line: Option<&str>,
) -> Result<bool> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/snapshot_put.sql"))?
        .execute((id, view, detail, SHAPE, json, line))?
        > 0)
}
