//! `agent_update`: a working child's progress, as its status line and a notice for its parent.

use super::{answer_row, Agents, Engine};
use crate::contract::agent as contract;
use crate::engine::Reply;
use crate::error::Result;
use crate::paths::ROOT;
use crate::store::agents;
use crate::store::agents::mailbox;
use crate::time::now_iso;

/// A working child reports progress: its status changes and its parent gets a notice.
pub(in crate::engine) fn update(e: &Engine, req: contract::Update) -> Result<Reply> {
    let e = &Agents(e);
    let registry = e.registry()?;
    let message = req.message.as_str();
    let me = e.working_self(registry, "Only a working child may report progress")?;
    let text = contract::progress_notice(&me.path, message);
    e.store.write(|tx| {
        let at = now_iso();
        agents::set_status(tx, &me.id, message, &at)?;
        mailbox::insert(
            tx,
            &mailbox::NewMail {
                thread_id: &me.id,
                direction: mailbox::Direction::ToParent,
                kind: mailbox::MailKind::Progress,
                send_key: &format!("progress:{}", crate::ids::random_hex(16)),
                message_id: None,
                body: &text,
                recipient: Some(me.parent_path.as_deref().unwrap_or(ROOT)),
                at: &at,
                delivered: false,
            },
        )?;
        Ok(())
    })?;
    answer_row(e.row_by_id(&me.id)?)
}
