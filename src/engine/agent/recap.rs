//! The final recap (`finalRecap`, 0.19, off by default): a detached child's settlement notice is
//! written held back (`recap_held`, still a pending row, so a crash loses none); once no
//! detached run reporting to the same recipient still works, the held results become one
//! notice (kind `recap`), in the transaction that records the last settlement. Timeout and
//! progress notices are never held, and a result a foreground request reports is superseded
//! as before. The row watcher releases what a restore left held (a run that came back paused
//! writes no settlement).

use crate::store::Conn;
use serde_json::json;

use super::Agents;
use crate::contract::agent as contract;
use crate::domain::ManagerId;
use crate::error::Result;
use crate::store::agents::{mailbox, recap, timers};
use crate::time::now_iso;

impl Agents<'_> {
    /// After a settlement notice (`mail`, unless it was written delivered) for `recipient`
    /// was written in `tx`: held when the run was detached, and the recap released when it was
    /// the last outstanding one.
    pub(super) fn recap_after_settle(
        &self,
        tx: &Conn,
        recipient: &str,
        mail: Option<i64>,
        detached: bool,
    ) -> Result<()> {
        if !self.cfg.agent_settings.final_recap {
            return Ok(());
        }
        let registry = self.agent.registry();
        if let (true, Some(m)) = (detached, mail) {
            recap::hold(tx, m)?;
        }
        self.release_recap(tx, registry, recipient)
    }

    /// Turns the results held for `recipient` into one notice when no detached run reporting
    /// to it still works.
    pub(super) fn release_recap(
        &self,
        tx: &Conn,
        registry: ManagerId,
        recipient: &str,
    ) -> Result<()> {
        if recap::outstanding(tx, registry, recipient)? > 0 {
            return Ok(());
        }
        let held = recap::held(tx, registry, recipient)?;
        let (Some(first), Some(last)) = (held.first(), held.last()) else {
            return Ok(());
        };
        let at = now_iso();
        for h in &held {
            mailbox::consume(tx, h.id, &at)?;
        }
        let texts: Vec<&str> = held.iter().map(|h| h.body.as_str()).collect();
        let body = contract::recap_notice(&texts);
        let details = json!({
            "kind": "recap",
            "results": held.iter().map(|h| json!({"path": h.path, "state": h.state, "text": h.body})).collect::<Vec<_>>(),
        })
        .to_string();
        let written = mailbox::insert(
            tx,
            &mailbox::NewMail {
                thread_id: &last.thread_id,
                direction: mailbox::Direction::ToParent,
                kind: mailbox::MailKind::Notice,
                send_key: &format!("recap:{}-{}", first.id, last.id),
                message_id: None,
                body: &body,
                recipient: Some(recipient),
                at: &at,
                delivered: false,
            },
        )?;
        if let Some(row) = written {
            timers::set_mail_details(tx, row, &details)?;
        }
        Ok(())
    }

    /// The row watcher's side: results held for this serve's caller are released once nothing
    /// detached still works for it.
    pub(super) fn release_recap_if_due(&self, conn: &Conn, registry: ManagerId) -> Result<()> {
        if !self.cfg.agent_settings.final_recap
            || recap::held(conn, registry, self.caller())?.is_empty()
            || recap::outstanding(conn, registry, self.caller())? > 0
        {
            return Ok(());
        }
        self.store
            .write(|tx| self.release_recap(tx, registry, self.caller()))
    }
}
