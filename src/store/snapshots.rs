//! `thread_snapshots` (migration V8): closed threads' rendered answers. The store keeps and
//! finds the bytes; what they say is the engine's business. Rows are only read for this
//! build's [`SHAPE`], so a different build's rendering is never served.

use crate::store::db::{params, q};
use crate::store::Conn;

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

impl crate::store::db::ToParam for View {
    fn value(&self) -> crate::store::db::Value<'_> {
        crate::store::db::Value::Text(self.as_str().into())
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
    conn.opt(
        q!("snapshot_cached", kept_col),
        params![id, view, detail, SHAPE],
        |r| Ok((r.get(kept_col::JSON)?, r.get(kept_col::LINE)?)),
    )
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
    Ok(conn.execute(
        q!("snapshot_put"),
        params![id, view, detail, SHAPE, json, line],
    )? > 0)
}
