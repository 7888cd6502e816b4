//! `thread_snapshots` (migration V8): closed threads' rendered answers. The store keeps and
//! finds the bytes; what they say is the engine's business. Rows are only read for this
//! build's [`SHAPE`], so a different build's rendering is never served.

use rusqlite::types::{ToSql, ToSqlOutput};
use rusqlite::{Connection, OptionalExtension};

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

/// One thread's cached `view` at `detail`, if this build rendered it.
pub fn cached(conn: &Connection, id: &str, view: View, detail: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached(include_str!("../../sql/snapshot_cached.sql"))?
        .query_row((id, view, detail, SHAPE), |r| r.get(0))
        .optional()?)
}

/// A cached view's JSON and, for a summary snapshot, the thread's list line.
pub type Cached = (String, Option<String>);

/// The cached `view` at `detail` of each of `count` threads whose ids are the JSON array
/// `ids`, in their order; `None` where there is none. One query.
pub fn cached_of_threads(
    conn: &Connection,
    ids: &str,
    count: usize,
    view: View,
    detail: &str,
) -> Result<Vec<Option<Cached>>> {
    let mut found: Vec<Option<Cached>> = vec![None; count];
    let mut stmt =
        conn.prepare_cached(include_str!("../../sql/snapshots_cached_of_threads.sql"))?;
    let mut rows = stmt.query((ids, view, detail, SHAPE))?;
    while let Some(r) = rows.next()? {
        let at = r.get::<_, i64>(0)? as usize;
        if let Some(slot) = found.get_mut(at) {
            *slot = Some((r.get(1)?, r.get(2)?));
        }
    }
    Ok(found)
}

/// Keeps `json` (and its list `line`) as thread `id`'s `view` at `detail`, if the thread is
/// closed. Call it inside
/// the write transaction that rendered `json` from the rows: then no change can come between
/// the reading and the keeping, and every later change deletes the row (V8's triggers).
/// Returns whether it was kept.
pub fn put(
    conn: &Connection,
    id: &str,
    view: View,
    detail: &str,
    json: &str,
    line: Option<&str>,
) -> Result<bool> {
    Ok(conn
        .prepare_cached(include_str!("../../sql/snapshot_put.sql"))?
        .execute((id, view, detail, SHAPE, json, line))?
        > 0)
}
