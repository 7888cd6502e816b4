//! `stop`: a child this serve holds, or a stop handed to the serve that holds it.

use super::remote::{self, Outcome};
use super::{find, held_by, reply, settle_if_orphaned, Engine};
use crate::contract::format;
use crate::contract::projection::{Detail, Projection};
use crate::contract::thread::{Details, Single, SnapshotJson};
use crate::domain::{CommandKind, ExitKind, ThreadId};
use crate::engine::Reply;
use crate::error::Result;
use crate::identity::Holder;
use crate::runtime::StopBy;
use crate::store::events::{self, NewEvent};
use crate::store::queue;
use crate::time::now_iso;
use serde_json::json;

pub(in crate::engine) async fn stop(
    e: &Engine,
    req: crate::contract::thread::Stop,
) -> Result<Reply> {
    let (reference, force) = (req.id.as_str(), req.force);
    let row = find(e, reference)?;
    // A thread still waiting in the queue is taken out of it and closed, never launched.
    let dequeued = stop_queued(e, &row.id)?;
    if !dequeued {
        e.rt.await_launch(&row.id, crate::runtime::LAUNCH_WAIT)
            .await;
    }
    let holder = remote::holder(e, &row.id)?;
    let (was_live, note) = match holder {
        _ if dequeued => (true, String::new()),
        Some(Holder::Elsewhere(owner)) => {
            match remote::request(e, &row.id, CommandKind::stop(force), None, owner).await? {
                Outcome::Done(result) => (result != STOP_ALREADY_CLOSED, held_by(owner)),
                Outcome::Failed(err) => return Err(err),
                Outcome::Withdrawn(remote::Withdrawn::NotPickedUp) => {
                    return Err(remote::not_carried_out(
                        &row.path,
                        "stop",
                        remote::Withdrawn::NotPickedUp,
                    ))
                }
                // Gone or closed meanwhile: there is nothing left to stop.
                Outcome::Withdrawn(_) => {
                    settle_if_orphaned(e, &row.id)?;
                    (false, String::new())
                }
                Outcome::StillRunning => return Err(remote::still_running(&row.path, "stop")),
            }
        }
        Some(Holder::Gone) => {
            remote::restore_orphans(e)?;
            (false, String::new())
        }
        _ => (
            e.rt.stop(&row.id, force, StopBy::Caller).await?,
            String::new(),
        ),
    };
    e.rt.flush().await;
    let facts = e.facts(&row.id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let text = format::stopped(&snap, !was_live) + &note;
    reply(
        text,
        Details::Stopped {
            thread: Single::of(SnapshotJson::new(&snap)?),
            already_closed: !was_live,
        },
    )
}

/// The results a `commands` row carried out at once records (`threadbase top` and
/// `threadbase stop` read the same texts): a stop of a live thread, ...
pub const STOPPED: &str = "stopped";
/// ... a stop of a thread that was closed already, ...
pub const STOP_ALREADY_CLOSED: &str = "already closed";
/// ... and an interrupt (contract C).
pub const INTERRUPTED: &str = "interrupted";

/// A stop of a thread still waiting in the queue (`Engine::stop_queued`): the row is closed as stopped with its `thread_closed` event, in
/// one transaction, only while it still waits for a slot.
pub(in crate::engine) fn stop_queued(e: &Engine, id: &ThreadId) -> Result<bool> {
    e.store.write(|tx| {
        let at = now_iso();
        if !queue::dequeue(tx, id, &at)? {
            return Ok(false);
        }
        let data = json!({"exit": {"kind": ExitKind::Stopped, "message": DEQUEUED}}).to_string();
        events::append(
            tx,
            id,
            &[NewEvent {
                at: &at,
                kind: "thread_closed",
                data: &data,
            }],
        )?;
        Ok(true)
    })
}

/// The exit message of a thread stopped while queued (as `sql/queue_dequeue.sql` writes it).
pub const DEQUEUED: &str = "Stopped while queued; never launched.";
