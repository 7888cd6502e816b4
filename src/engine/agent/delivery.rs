//! Steering delivery: a thread's pending `mailbox` steers go to the run this serve holds (or
//! start a new one). A steer counts as consumed only once it shows up in the child's
//! transcript, so a crash between sending and marking never delivers it twice.

use super::Agents;
use crate::contract::agent::AgentState;
use crate::domain::ThreadId;
use crate::error::Result;
use crate::runtime::SendMode;
use crate::store::agents::mailbox::{self, PendingSteer};
use crate::store::agents::AgentRow;
use crate::time::now_iso;

impl Agents<'_> {
    pub(super) fn pending_steers(&self, id: &ThreadId) -> Result<Vec<PendingSteer>> {
        let conn = self.store.read()?;
        mailbox::pending_steers(&conn, id)
    }

    /// Delivers a thread's pending steering (this serve holds or will hold its process): a
    /// message already in the transcript is marked consumed; with no live process the first
    /// message starts a new run on the same session; the rest go into Pi's steering queue.
    pub(super) async fn deliver_steering(&self, id: &ThreadId) -> Result<()> {
        let _guard = self.locks.lock(id).await;
        let row = self.row_by_id(id)?;
        let current = row.launch_seq.to_string();
        let mut pending = self.unconsumed_steers(&row)?;
        // Sent to the run that is live now: that run consumes it.
        pending.retain(|s| !(row.live && s.sent_to.as_deref() == Some(current.as_str())));
        if pending.is_empty() {
            return Ok(());
        }
        let mut rest = pending.into_iter();
        // With no live process here, the first message starts a new run.
        let mut launched_with = None;
        if !self.rt.is_live(id) {
            if row.live && !self.is_mine(&row) && self.owner_alive(&row) {
                return Ok(()); // another serve's process; it delivers
            }
            if !row.active() {
                // Nothing reserved a run (a stale row): leave the steer for the next resume.
                return Ok(());
            }
            let first = rest.next().expect("non-empty");
            if let Err(e) = self.launch_run(id, first.body, None).await {
                self.settle_run(id, AgentState::Failed, None, Some(e.message.clone()))?;
                return Err(e);
            }
            launched_with = Some(first.id);
        }
        let launch_seq = self.row_by_id(id)?.launch_seq;
        if let Some(mailbox_id) = launched_with {
            self.mark_sent(mailbox_id, launch_seq)?;
        }
        for s in rest {
            let out = self.rt.send(id, SendMode::Steer, &s.body).await?;
            if out.accepted == Some(true) {
                self.mark_sent(s.id, launch_seq)?;
            }
        }
        Ok(())
    }

    fn mark_sent(&self, mailbox_id: i64, launch_seq: i64) -> Result<()> {
        self.store
            .write(|tx| mailbox::steer_sent(tx, mailbox_id, launch_seq))
    }

    /// Marks a pending mailbox row delivered; false when someone claimed it first.
    pub(super) fn consume_mail(&self, mailbox_id: i64) -> Result<bool> {
        self.store
            .write(|tx| mailbox::consume(tx, mailbox_id, &now_iso()))
    }

    /// A thread's pending steers that its transcript does not show yet; the ones it shows were
    /// consumed by a run (perhaps before a crash) and are marked so, never sent again.
    pub(super) fn unconsumed_steers(&self, row: &AgentRow) -> Result<Vec<PendingSteer>> {
        let pending = self.pending_steers(&row.id)?;
        if pending.is_empty() {
            return Ok(pending);
        }
        let transcript = row
            .session_file
            .as_deref()
            .and_then(|f| crate::pi::session::SessionFile::read(f).ok());
        let mut unconsumed = Vec::with_capacity(pending.len());
        for s in pending {
            if transcript
                .as_ref()
                .is_some_and(|t| user_message_since(t, &s.body, &s.created_at))
            {
                self.consume_mail(s.id)?;
            } else {
                unconsumed.push(s);
            }
        }
        Ok(unconsumed)
    }
}

/// True when `file` holds a user message with exactly `text` written at or after `since`:
/// the child consumed that steering message.
fn user_message_since(file: &crate::pi::session::SessionFile, text: &str, since: &str) -> bool {
    file.entries.iter().rev().any(|e| {
        e["type"] == "message"
            && e["message"]["role"] == "user"
            && e["timestamp"].as_str().is_some_and(|t| t >= since)
            && crate::pi::session::content_text(&e["message"]["content"], "").unwrap_or_default()
                == text
    })
}
