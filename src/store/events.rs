//! Lifecycle events: appended in batches, a ring of the newest 40 per thread, `seq` only grows.

use rusqlite::{named_params, Connection, OptionalExtension};
use serde::Serialize;
use serde_json::Value;

use crate::error::Result;

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
pub fn append(conn: &Connection, thread_id: &str, events: &[NewEvent<'_>]) -> Result<i64> {
    if events.is_empty() {
        return Ok(0);
    }
    let floor: Option<String> = conn
        .prepare_cached(include_str!("../../sql/event_last_at.sql"))?
        .query_row([thread_id], |r| r.get(0))
        .optional()?;
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
    let mut bump = conn.prepare_cached(include_str!("../../sql/event_bump_seq.sql"))?;
    let last_seq: i64 = bump.query_row(
        named_params! {":count": events.len() as i64, ":at": last_at, ":thread_id": thread_id},
        |r| r.get(0),
    )?;
    let first_seq = last_seq - events.len() as i64 + 1;
    let keep_from = last_seq - RETAINED_EVENTS + 1;
    let mut insert = conn.prepare_cached(include_str!("../../sql/event_insert.sql"))?;
    for (i, (e, at)) in events.iter().zip(&ats).enumerate() {
        let seq = first_seq + i as i64;
        if seq >= keep_from {
            insert.execute((thread_id, seq, at, e.kind, e.data))?;
        }
    }
    if last_seq > RETAINED_EVENTS {
        let mut trim = conn.prepare_cached(include_str!("../../sql/event_trim.sql"))?;
        trim.execute((thread_id, last_seq))?;
    }
    Ok(last_seq)
}

/// A stored event, as projections read it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredEvent {
    pub seq: i64,
    pub at: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub data: Value,
}

/// A thread's retained events, oldest first.
pub fn of_thread(conn: &Connection, thread_id: &str) -> Result<Vec<StoredEvent>> {
    let mut stmt = conn.prepare_cached(include_str!("../../sql/events_of_thread.sql"))?;
    let rows = stmt.query_map([thread_id], |r| {
        let data: String = r.get(3)?;
        Ok(StoredEvent {
            seq: r.get(0)?,
            at: r.get(1)?,
            kind: r.get(2)?,
            data: serde_json::from_str(&data).unwrap_or(Value::Null),
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
}
