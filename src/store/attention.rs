//! What needs the user about a thread, derived once (issue 45): the view `thread_attention`
//! (V16; PostgreSQL V5) judges every thread from its rows (its question, its last turn's
//! error, its exit, the child's last activity against its manager's stall_ms, its host's and
//! its owner's heartbeats) and gives one word per thread that needs the user. Every surface
//! reads it through this module: the `thread` tool's snapshots and texts, notices, `tree`,
//! `list`, `show`, `usage`, `top`, the web page, `/threads`, contracts B's and C's views.
//!
//! One thing only the host that holds a thread can know sooner than its rows: that the serve
//! holding it has died (its pid is gone), before its heartbeat ages past the lease. The views
//! of that host add it ([`seen_here`]); the database alone says it once the heartbeat is old.

use std::collections::HashMap;

use serde::Serialize;

use crate::domain::{Attention, ThreadId};
use crate::error::Result;
use crate::store::db::{params, q, Row};
use crate::store::rows::columns;
use crate::store::{Conn, ThreadIds};

columns! {
    /// A row of `thread_attention` (`{attention_row}`, over the view aliased `a`): what
    /// [`Need`] holds.
    pub mod col as "{attention_row}" {
        THREAD_ID = "a.thread_id",
        ATTENTION = "a.attention",
        SINCE = "a.since",
        DETAIL = "a.detail",
    }
}

/// What needs the user about one thread: the word, since when, and why (the view's row).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Need {
    pub attention: Attention,
    /// When it began (a timestamp as the rows hold them), when the rows say.
    pub since: Option<String>,
    /// One line: the question, the error's first line, the host, the silence.
    pub detail: Option<String>,
}

impl Need {
    /// The view's row at [`col`]'s positions, from `at` on.
    pub(in crate::store) fn from_row(r: &Row<'_>, at: usize) -> Result<Need> {
        Ok(Need {
            attention: r.get(at + col::ATTENTION)?,
            since: r.get(at + col::SINCE)?,
            detail: r.get(at + col::DETAIL)?,
        })
    }

    /// The state words' second half for a live thread (`live/asking`, `live/owner gone`, …).
    pub fn word(&self) -> &'static str {
        self.attention.word()
    }
}

/// What needs the user about each of `ids`, in their order (`None`: nothing). One query.
pub fn of_threads(conn: &Conn, ids: &ThreadIds) -> Result<Vec<Option<Need>>> {
    let mut slots = vec![None; ids.len()];
    conn.by_position(
        q!("attention_of_threads", crate::store::batch_col, col),
        ids,
        &mut slots,
        |r| Need::from_row(r, crate::store::batch_col::COUNT).map(Some),
    )?;
    Ok(slots)
}

/// What needs the user about one thread.
pub fn of_thread(conn: &Conn, id: &ThreadId) -> Result<Option<Need>> {
    Ok(of_threads(conn, &ThreadIds::new([id])?)?.pop().flatten())
}

/// [`of_thread`] on a database of any version: nothing before the view (V16).
pub fn of_thread_checked(conn: &Conn, id: &ThreadId) -> Result<Option<Need>> {
    if !has_view(conn)? {
        return Ok(None);
    }
    of_thread(conn, id)
}

/// Whether the database has the view (schema version 16 or later).
pub fn has_view(conn: &Conn) -> Result<bool> {
    Ok(conn.one(q!("attention_schema"), params![], |r| r.get::<i64>(0))? > 0)
}

/// Every thread that needs the user, by id; nothing on a database older than the view (the
/// read-only commands open every version as it is).
pub fn all(conn: &Conn) -> Result<HashMap<ThreadId, Need>> {
    if !has_view(conn)? {
        return Ok(HashMap::new());
    }
    let mut out = HashMap::new();
    conn.each(q!("attention_all", col), params![], |r| {
        out.insert(r.get(col::THREAD_ID)?, Need::from_row(r, 0)?);
        Ok(())
    })?;
    Ok(out)
}

/// A view's judgement on the host that holds the thread: `owner_gone_here` when the serve
/// recorded as its owner is a process of this host that is gone (the pid says so before the
/// heartbeat ages), which outranks every word but `unreachable`; a view row saying the
/// owner is gone while this host sees it alive is dropped (its heartbeat lags, as in an
/// outage). `last_event_at` is the thread's, the `since` of what the pid shows.
pub fn seen_here(
    need: Option<Need>,
    owner_gone_here: bool,
    owner_pid: Option<i64>,
    last_event_at: Option<&str>,
) -> Option<Need> {
    match need {
        Some(n) if n.attention == Attention::Unreachable => Some(n),
        _ if owner_gone_here => Some(Need {
            attention: Attention::OwnerGone,
            since: last_event_at.map(str::to_string),
            detail: Some(match owner_pid {
                Some(pid) => format!("serve pid {pid} is gone"),
                None => "its serve is gone".to_string(),
            }),
        }),
        Some(n) if n.attention == Attention::OwnerGone => None,
        other => other,
    }
}
