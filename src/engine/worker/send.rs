//! `threads_send`: a keyed message for one of this coordinator's workers, admitted once per
//! key (a retry with the same text is the same message), then delivered by `drive`.

use super::drive::drive;
use super::owned;
use crate::contract::worker::{send_message_id, Sent};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::store::mailbox::{self, Direction, MailKind, NewMail};
use crate::store::workers;
use crate::time::now_iso;

pub(in crate::engine) async fn send(
    e: &Engine,
    req: crate::contract::worker::SendRequest,
) -> Result<crate::engine::Reply> {
    let (key, text) = (req.key.as_str(), req.text.as_str());
    let row = owned(e, &req.worker_id)?;
    let id = row.id().clone();
    let message_id = send_message_id(&req.worker_id, key);
    let send_key = format!("send:{key}");
    e.store.write(|tx| {
        let written = mailbox::insert(
            tx,
            &NewMail {
                thread_id: &id,
                direction: Direction::ToChild,
                kind: MailKind::FollowUp,
                send_key: &send_key,
                message_id: Some(&message_id),
                body: text,
                recipient: None,
                at: &now_iso(),
                delivered: false,
            },
        )?;
        if written.is_some() {
            // A new message is new work (an identical retry is not); refused, it is rolled back.
            crate::engine::budget::check_budget(e, tx, Some(&id), "threads_send")?;
        } else if workers::message_by_key(tx, &id, &send_key)?.body != text {
            return Err(Error::conflict(format!(
                "This send key already belongs to different text (message {message_id}). Repair: resend the identical text to retry, or use a new key for a new message."
            )));
        }
        workers::unhide_after_send(tx, &id)
    })?;
    drive(e, &req.worker_id).await?;
    e.rt.flush().await;
    Ok(crate::engine::Reply::shaped(move |w| {
        super::tool_result(
            w,
            &Sent {
                worker_id: req.worker_id.as_str(),
                message_id: &message_id,
            },
        )
    }))
}
