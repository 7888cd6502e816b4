//! `send`: to a child this serve holds, or handed to the serve that holds it.

use serde::{Deserialize, Serialize};

use super::remote::{self, Outcome};
use super::{closed_error, find, held_by, reply, settle_if_orphaned, Engine, REFRESH_TIMEOUT};
use crate::contract::format;
use crate::contract::projection::{Detail, Projection};
use crate::contract::thread::{Details, Single, SnapshotJson};
use crate::domain::CommandKind;
use crate::engine::Reply;
use crate::error::Result;
use crate::identity::Holder;
use crate::runtime::SendMode;
use crate::store::threads::ThreadRow;

/// A send's payload in a `commands` row for the serve that holds the thread.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct SendPayload {
    pub(super) message: String,
    /// None: the owner picks `prompt` (idle) or `follow_up`.
    pub(super) mode: Option<SendMode>,
    /// Who sent it, as the thread's detail shows it (issue 50); absent in rows of older
    /// builds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) by: Option<String>,
}

/// The payload of a `send` command row for `message` (mode `None`: the owner picks `prompt`
/// when the thread is idle, else `follow_up`), as the owner's watcher reads it back
/// (`carry_out`): for another process that asks a serve to send (the web view).
/// `by` names the sender for the thread's detail.
pub fn send_payload(message: &str, mode: Option<SendMode>, by: &str) -> Result<String> {
    Ok(serde_json::to_string(&SendPayload {
        message: message.to_string(),
        mode,
        by: Some(by.to_string()),
    })?)
}

/// What a send did, as the owner records it.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct SendDone {
    mode: SendMode,
    accepted: Option<bool>,
    error: Option<String>,
}

pub(in crate::engine) async fn send(
    e: &Engine,
    req: crate::contract::thread::Send,
) -> Result<Reply> {
    let (reference, message, mode) = (req.id.as_str(), req.message.as_str(), req.mode);
    let row = find(e, reference)?;
    refuse_while_queued(e, &row, "send")?;
    e.rt.await_launch(&row.id, crate::runtime::LAUNCH_WAIT)
        .await;
    let by = format!("session {} (thread tool)", e.cfg.session_id);
    let holder = remote::holder(e, &row.id)?;
    let (done, via) = match holder {
        Some(Holder::Here) => (send_here(e, &row, message, mode, &by).await?, None),
        Some(Holder::Elsewhere(owner)) => {
            let payload = serde_json::to_string(&SendPayload {
                message: message.to_string(),
                mode,
                by: Some(by.clone()),
            })?;
            let outcome =
                remote::request(e, &row.id, CommandKind::Send, Some(&payload), owner).await?;
            let done = match outcome {
                Outcome::Done(text) => serde_json::from_str::<SendDone>(&text)?,
                Outcome::Failed(err) => return Err(err),
                Outcome::Withdrawn(why) => {
                    settle_if_orphaned(e, &row.id)?;
                    return Err(remote::not_carried_out(&row.path, "send", why));
                }
                // Contract A's answer to a send whose answer did not come in time.
                Outcome::StillRunning => SendDone {
                    mode: mode.unwrap_or(SendMode::FollowUp),
                    accepted: None,
                    error: Some(format!(
                        "Timed out waiting for the serve that holds {} to finish the send. It was handed over and may still be delivered; poll or wait before retrying.",
                        row.path
                    )),
                },
            };
            (done, Some(owner))
        }
        Some(Holder::Gone) => {
            remote::restore_orphans(e)?;
            return Err(closed_error(reference, &row));
        }
        None => return Err(closed_error(reference, &row)),
    };
    let facts = e.facts(&row.id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let mode = done.mode;
    let mut text = format::sent(&snap, mode, done.accepted, done.error.as_deref());
    if let Some(owner) = via {
        text.push_str(&held_by(owner));
    }
    reply(
        text,
        Details::Sent {
            thread: Single::of(SnapshotJson::new(&snap)?),
            mode,
            accepted: done.accepted,
            error: done.error,
        },
    )
}

/// A send to a child this serve holds; one that reached the child is recorded as a delivered
/// `to_child` mailbox row naming `by` (the thread's detail lists them: issue 50).
pub(super) async fn send_here(
    e: &Engine,
    row: &ThreadRow,
    message: &str,
    mode: Option<SendMode>,
    by: &str,
) -> Result<SendDone> {
    crate::engine::budget::check_budget(e, &e.store.read()?, Some(&row.id), "send")?;
    // Its phase decides the default mode: refreshed first when it is held here.
    let _ = e.rt.refresh(&row.id, REFRESH_TIMEOUT).await;
    let phase = e.rt.watch(&row.id).map(|v| v.borrow().phase);
    let mode = match mode {
        Some(mode) => mode,
        None if phase == Some(crate::runtime::mapping::Phase::Idle) => SendMode::Prompt,
        None => SendMode::FollowUp,
    };
    let outcome = e.rt.send(&row.id, mode, message).await?;
    e.rt.flush().await;
    if outcome.accepted != Some(false) {
        crate::store::mailbox::record_sent(&e.store, &row.id, mode.as_mail_kind(), message, by)?;
    }
    Ok(SendDone {
        mode,
        accepted: outcome.accepted,
        error: outcome.error,
    })
}

/// A `send` to a thread still waiting in the queue has no process to reach: refused with its
/// position and what to do (its prompt goes out when it is launched).
fn refuse_while_queued(e: &Engine, row: &ThreadRow, verb: &str) -> Result<()> {
    match crate::store::queue::position(&e.store.read()?, &row.id)? {
        None => Ok(()),
        Some(n) => Err(crate::error::Error::conflict(format!(
            "{} is queued (position {n}) and has no Pi process yet to {verb} to. Repair: wait on it (its prompt goes out when a slot frees and it launches), then {verb}; or stop it to take it out of the queue.",
            row.path
        ))),
    }
}
