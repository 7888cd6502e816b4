//! `archive`: a closed thread's archived flag, with its event.

use serde_json::json;

use super::{find, reply, Engine};
use crate::contract::format;
use crate::contract::projection::{Detail, Projection};
use crate::contract::thread::{Details, Single, SnapshotJson};
use crate::domain::ThreadId;
use crate::engine::Reply;
use crate::error::{Error, Result};
use crate::store::events::{self, NewEvent};
use crate::store::threads;
use crate::time::now_iso;

pub(in crate::engine) fn archive(
    e: &Engine,
    req: crate::contract::thread::Archive,
) -> Result<Reply> {
    let (reference, archived) = (req.id.as_str(), req.archived);
    let row = find(e, reference)?;
    if row.is_live() {
        return Err(Error::conflict(format!(
            "Cannot archive live thread {}. Repair: stop or wait for the thread to close before archiving, or omit archive for live work.",
            row.path
        )));
    }
    set_archived(&e.store, &row.id, archived)?;
    let facts = e.facts(&row.id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let text = format::archived(&snap, archived);
    reply(
        text,
        Details::Archived {
            thread: Single::of(SnapshotJson::new(&snap)?),
            archived,
        },
    )
}

/// Sets a thread's archived flag and records its `thread_archived` event, in one
/// transaction: the write of contract A's `archive` (the caller checks the thread is closed),
/// also for the web view.
pub fn set_archived(store: &crate::Store, id: &ThreadId, archived: bool) -> Result<()> {
    store.write(|tx| {
        let at = now_iso();
        threads::set_archived(tx, id, archived, &at)?;
        let data = json!({"archived": archived}).to_string();
        events::append(
            tx,
            id,
            &[NewEvent {
                at: &at,
                kind: "thread_archived",
                data: &data,
            }],
        )?;
        Ok(())
    })
}
