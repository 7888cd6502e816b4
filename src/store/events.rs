//! Lifecycle events: appended in batches, a ring of the newest 40 per thread, `seq` only grows.

use crate::store::db::{named, params, q, Cell, Row};
use crate::store::Conn;
use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use crate::domain::ThreadId;
use crate::error::Result;
use crate::store::rows::columns;
use crate::store::{batch_col, ThreadIds};

/// Events kept per thread.
pub const RETAINED_EVENTS: i64 = 40;

/// One event to append.
#[derive(Debug, Clone)]
pub struct NewEvent<'a> {
    pub at: &'a str,
    pub kind: &'a str,
    /// A JSON object with the event's fields beyond seq/at/type.
    pub data: &'a str,
}

/// Appends events to one thread in order and trims the ring; returns the last seq. Call it
/// inside a write transaction (batches from the ingest path share one).
///
/// Events never go back in time: an event stamped before the thread's latest stored event
/// (a child's line read just before a stop request, but committed after the stop's own event)
/// takes that event's time, so seq order and time order always agree.
pub fn append(conn: &Conn, thread_id: &ThreadId, events: &[NewEvent<'_>]) -> Result<i64> {
    if events.is_empty() {
        return Ok(0);
    }
    let floor: Option<String> = conn.opt(q!("event_last_at"), params![thread_id], |r| r.get(0))?;
    let mut floor = floor.unwrap_or_default();
    let ats: Vec<String> = events
        .iter()
        .map(|e| {
            if e.at > floor.as_str() {
                floor = e.at.to_string();
            }
            floor.clone()
        })
        .collect();
    let last_at = ats.last().map(String::as_str).unwrap_or_default();
    let last_seq: i64 = conn.one(
        q!("event_bump_seq"),
        named! {":count": events.len() as i64, ":at": last_at, ":thread_id": thread_id},
        |r| r.get(0),
    )?;
    let first_seq = last_seq - events.len() as i64 + 1;
    let keep_from = last_seq - RETAINED_EVENTS + 1;
    if conn.sqlite().is_some() {
        let insert = q!("event_insert");
        for (i, (e, at)) in events.iter().zip(&ats).enumerate() {
            let seq = first_seq + i as i64;
            if seq >= keep_from {
                conn.execute(insert, params![thread_id, seq, at, e.kind, e.data])?;
            }
        }
    } else {
        // One statement for the batch: a round trip to the server per event would bound the
        // ingest at a few thousand events a second (benches/ingest.rs, the PostgreSQL run).
        let mut batch = String::from("[");
        for (i, (e, at)) in events.iter().zip(&ats).enumerate() {
            let seq = first_seq + i as i64;
            if seq >= keep_from {
                if batch.len() > 1 {
                    batch.push(',');
                }
                batch.push_str(&format!(
                    "[{seq},{},{},{}]",
                    serde_json::to_string(at)?,
                    serde_json::to_string(e.kind)?,
                    e.data
                ));
            }
        }
        batch.push(']');
        conn.execute(q!("event_insert_batch"), params![thread_id, batch])?;
    }
    if last_seq > RETAINED_EVENTS {
        let trim = q!("event_trim");
        conn.execute(trim, params![thread_id, last_seq])?;
    }
    Ok(last_seq)
}

/// A stored event as the CLI and tests read it, `data` parsed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredEvent {
    pub seq: i64,
    pub at: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub data: Value,
}

/// A stored event as projections read it: `data` stays the stored JSON text, which the
/// projection passes through without building a value; `kind` is one of the schema's
/// [`TYPES`] (a copy only for a type it does not know).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    pub seq: i64,
    pub at: String,
    pub kind: Cow<'static, str>,
    pub data: String,
}

/// The event types `thread_events.type` allows (V9's CHECK, widened by V18).
pub const TYPES: [&str; 16] = [
    "thread_started",
    "thread_resumed",
    "thread_forked",
    "thread_archived",
    "thread_stopping",
    "thread_closed",
    "thread_error",
    "turn_started",
    "turn_completed",
    "tool_started",
    "tool_completed",
    "assistant_message",
    "ui_request",
    "thread_adopted",
    "budget_warned",
    "budget_stopped",
];

columns! {
    /// A retained event's columns, in order (`{event_row}` in `sql/events_of_thread.sql` and,
    /// after the batch's `{batch_row}`, `sql/events_of_threads.sql`, which read
    /// `thread_events e`): what [`EventRow`] holds, read by these positions.
    pub mod col as "{event_row}" {
        SEQ = "e.seq",
        AT = "e.at",
        KIND = "e.type",
        DATA = "e.data",
    }
}

impl EventRow {
    /// The [`col`] row that starts at position `first` of `r`.
    fn from_row(r: &Row<'_>, first: usize) -> Result<EventRow> {
        let kind = match r.cell(first + col::KIND)? {
            Cell::Text(t) => kind_of(t),
            _ => Cow::Owned(r.get(first + col::KIND)?),
        };
        Ok(EventRow {
            seq: r.get(first + col::SEQ)?,
            at: r.get(first + col::AT)?,
            kind,
            data: r.get(first + col::DATA)?,
        })
    }
}

/// An event's type as [`EventRow`] holds it: one of [`TYPES`] borrowed, another copied.
fn kind_of(t: &str) -> Cow<'static, str> {
    match TYPES.iter().find(|k| **k == t) {
        Some(k) => Cow::Borrowed(*k),
        None => Cow::Owned(t.to_owned()),
    }
}

/// A thread's retained events from the JSON array `sql/thread_facts.sql` aggregates them into
/// (`[[seq, at, type, data], …]`, `data` as its text), oldest first.
pub(in crate::store) fn rows_of_json(text: &str) -> Result<Vec<EventRow>> {
    let parts: Vec<(i64, String, String, String)> = serde_json::from_str(text).map_err(|e| {
        crate::error::Error::internal(format!(
            "A thread's events read by sql/thread_facts.sql are not the JSON array it makes ({e}). Repair: this is a bug in threadbase; report it with the command that failed."
        ))
    })?;
    let mut rows: Vec<EventRow> = parts
        .into_iter()
        .map(|(seq, at, kind, data)| EventRow {
            seq,
            at,
            kind: kind_of(&kind),
            data,
        })
        .collect();
    if !rows.is_sorted_by_key(|e| e.seq) {
        rows.sort_unstable_by_key(|e| e.seq);
    }
    Ok(rows)
}

impl EventRow {
    /// `data` parsed (`null` when it is not JSON).
    pub fn stored(self) -> StoredEvent {
        StoredEvent {
            data: serde_json::from_str(&self.data).unwrap_or(Value::Null),
            seq: self.seq,
            at: self.at,
            kind: self.kind.into_owned(),
        }
    }
}

/// A thread's retained events, oldest first.
pub fn rows_of_thread(conn: &Conn, thread_id: &ThreadId) -> Result<Vec<EventRow>> {
    let rows = conn
        .all(q!("events_of_thread", col), params![thread_id], |r| {
            EventRow::from_row(r, 0)
        })?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<Vec<_>>>()
}

/// A thread's retained events, oldest first, `data` parsed.
pub fn of_thread(conn: &Conn, thread_id: &ThreadId) -> Result<Vec<StoredEvent>> {
    Ok(rows_of_thread(conn, thread_id)?
        .into_iter()
        .map(EventRow::stored)
        .collect())
}

/// The retained events of several threads in one query, for a projection that shows at most
/// the newest `shown` of each: the answer holds, at each position of `ids`, that thread's
/// last `shown` events, oldest first.
pub fn rows_of_threads(conn: &Conn, ids: &ThreadIds, shown: i64) -> Result<Vec<Vec<EventRow>>> {
    let mut by_thread: Vec<Vec<EventRow>> = (0..ids.len()).map(|_| Vec::new()).collect();
    conn.each(
        q!("events_of_threads", batch_col, col),
        params![ids, shown],
        |r| {
            let at: usize = r.get(batch_col::AT)?;
            if let Some(events) = by_thread.get_mut(at) {
                events.push(EventRow::from_row(r, batch_col::COUNT)?);
            }
            Ok(())
        },
    )?;
    // Each thread's events come out of its primary-key range in seq order; make sure.
    for events in &mut by_thread {
        if !events.is_sorted_by_key(|e| e.seq) {
            events.sort_unstable_by_key(|e| e.seq);
        }
    }
    Ok(by_thread)
}
