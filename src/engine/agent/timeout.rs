//! Report-only timeouts (`timeoutMs` of agent_spawn and agent_steer, 0.19): a deadline on the
//! thread's row. The serve that holds the run fires it once, when it passes while the thread is
//! still working and not stopping: a `timeout` notice for its parent (or owner) with its recent
//! output, written in the transaction that clears the timer. It never stops the child. Settle,
//! stop, restore and reap clear the timer in the updates that record them.

use std::path::Path;

use serde_json::json;

use super::Agents;
use crate::contract::agent as contract;
use crate::domain::ThreadId;
use crate::error::Result;
use crate::paths::ROOT;
use crate::store::agents::mailbox;
use crate::store::agents::timers;
use crate::time::{now_iso, now_ms};

impl Agents<'_> {
    /// Arms (or re-arms from now) `id`'s timer; false when the thread is not working or is
    /// stopping. `THREADBASE_TEST_TIMEOUT_DIVISOR` (tests only) shortens the real deadline;
    /// the notice still reports `timeout_ms`.
    pub(super) fn arm_timer(&self, id: &ThreadId, timeout_ms: u64) -> Result<bool> {
        let divisor = self.cfg.settings.agent_timeout_divisor.max(1);
        let deadline = now_ms() + (timeout_ms / divisor) as i64;
        let armed = self
            .store
            .write(|tx| timers::arm(tx, id, timeout_ms, deadline))?;
        // The row watcher reads the next deadline after this commit.
        Ok(armed)
    }

    /// Called by the row watcher with its connection after each change: the next deadline
    /// among the timers of this serve's runs.
    pub(super) fn read_next_timer(&self, conn: &crate::store::Conn) -> Result<()> {
        let next = timers::next_deadline(conn, self.run_owner())?;
        *self
            .agent
            .next_timer
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = next;
        Ok(())
    }

    /// Fires this serve's due timers (called by the row watcher on every tick; a read of
    /// memory unless a deadline has passed).
    pub(crate) fn fire_due_timers(&self) -> Result<()> {
        let now = now_ms();
        {
            let mut next = self
                .agent
                .next_timer
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match *next {
                Some(at) if at <= now => *next = None, // read again after the writes below
                _ => return Ok(()),
            }
        }
        let due = {
            let conn = self.store.read()?;
            timers::due(&conn, self.run_owner(), now)?
        };
        for t in due {
            // What the child said last, from its own transcript.
            let recent = t
                .session_file
                .as_deref()
                .and_then(|f| crate::pi::session::SessionFile::read(Path::new(f)).ok())
                .map(|s| contract::recent_output(&s.entries))
                .unwrap_or_default();
            let text = contract::timeout_notice(&t.path, t.timeout_ms, &recent);
            let recipient = t.parent_path.clone().unwrap_or_else(|| ROOT.to_string());
            let details = json!({
                "kind": "timeout",
                "thread": t.path,
                "recipient": recipient,
                "timeoutMs": t.timeout_ms,
                "recentOutput": recent,
            })
            .to_string();
            self.store.write(|tx| {
                if timers::fire(tx, &t.id, t.deadline_ms)? != Some(true) {
                    return Ok(());
                }
                let at = now_iso();
                let written = mailbox::insert(
                    tx,
                    &mailbox::NewMail {
                        thread_id: &t.id,
                        direction: mailbox::Direction::ToParent,
                        kind: mailbox::MailKind::Notice,
                        send_key: &format!("timeout:{}", t.deadline_ms),
                        message_id: None,
                        body: &text,
                        recipient: Some(recipient.as_str()),
                        at: &at,
                        delivered: false,
                    },
                )?;
                if let Some(row) = written {
                    timers::set_mail_details(tx, row, &details)?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }
}
