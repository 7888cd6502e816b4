//! Contract A's nine actions (the pi-threads `thread` tool), one file per verb, on top of the
//! store and the runtime. What several verbs share is here: resolving a reference, the
//! result's envelope, and the notes of an action another serve
//! carried out; reserving a new thread (limits, names, the insert) is in `reserve`.

pub(super) mod archive;
mod carry;
pub(super) mod fork;
pub(super) mod list;
pub(super) mod order;
pub(super) mod poll;
mod reserve;
pub(super) mod resume;
pub(super) mod send;
pub(super) mod start;
pub(super) mod states;
pub(super) mod stop;
pub(super) mod wait;

use std::time::Duration;

use super::remote;
use super::Engine;
use crate::contract::thread::Details;
use crate::contract::ToolResult;
use crate::domain::ThreadId;
use crate::engine::Reply;
use crate::error::{Error, ErrorCode, Result};
use crate::identity::Holder;
use crate::store::refs::resolve;
use crate::store::threads::ThreadRow;

pub use archive::set_archived;
pub(crate) use carry::carry_out;
pub use send::send_payload;
pub(in crate::engine) use start::launch_queued;
pub(in crate::engine) use stop::stop_queued;
pub use stop::{INTERRUPTED, STOPPED, STOP_ALREADY_CLOSED};

/// Timeout of the `get_state` refresh a poll or send makes.
pub(super) const REFRESH_TIMEOUT: Duration = Duration::from_millis(1_500);

/// Pause between refreshes while waiting.
pub(super) const WAIT_STEP: Duration = Duration::from_millis(250);

/// A thread of this session by reference (the `thread_answer` tool's `id`).
pub(crate) fn find_thread(e: &Engine, reference: &str) -> Result<ThreadRow> {
    find(e, reference)
}

pub(super) fn find(e: &Engine, reference: &str) -> Result<ThreadRow> {
    let conn = e.store.read()?;
    resolve(&conn, e.scope(), reference)
}

/// `{content: [{type: text, text}], details}`, serialized.
pub(super) fn reply(text: String, details: Details) -> Result<Reply> {
    Ok(Reply::of(ToolResult::new(text, details)))
}

/// A thread this serve does not hold is read from its rows; one whose serve is gone is
/// restored (closed as stale) first, so its rows say what is true.
pub(super) fn settle_if_orphaned(e: &Engine, id: &ThreadId) -> Result<()> {
    if remote::holder(e, id)? == Some(Holder::Gone) {
        remote::restore_orphans(e)?;
    }
    Ok(())
}

pub(super) fn closed_error(reference: &str, row: &ThreadRow) -> Error {
    Error::new(
        ErrorCode::Closed,
        format!("Thread is closed: {reference}. Repair: resume it first with {{ \"action\": \"resume\", \"id\": \"{}\" }}, or start a new thread.", row.path),
    )
}

/// The line a result's text ends with when another serve carried the action out (a
/// threadbase addition: pi-threads has one process per manager); a serve of another host is
/// named with its host, since its pid means nothing here (issue 46).
pub(super) fn held_by(owner: crate::identity::Owner) -> String {
    match owner.other_host {
        Some(host) => format!(
            "\nNote: carried out by the serve that holds it (pid {} on host {host}).",
            owner.pid
        ),
        None => format!(
            "\nNote: carried out by the serve that holds it (pid {}).",
            owner.pid
        ),
    }
}

pub(super) fn gone_meanwhile(id: &ThreadId) -> Error {
    Error::new(
        ErrorCode::UnknownReference,
        format!("Unknown thread: {id} (it was removed meanwhile). Repair: list the threads and use a current id."),
    )
}
