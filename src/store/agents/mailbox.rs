//! Contract B's `mailbox` rows: steering messages for a child (consumed once its transcript
//! shows them) and notices for a parent agent (claimed by the recipient's serve).

use crate::domain::{ManagerId, ThreadId};
use crate::store::db::{named, params, q};
use crate::store::Conn;

use super::{ids, ProcessIdentity};
use crate::error::Result;
use crate::store::rows::columns;

pub use crate::store::mailbox::{insert, Direction, MailKind, NewMail};

/// Marks a pending mailbox row delivered; false when it was not pending (claimed already).
pub fn consume(conn: &Conn, mailbox_id: i64, at: &str) -> Result<bool> {
    Ok(conn.execute(q!("agent_mailbox_consumed"), params![mailbox_id, at])? > 0)
}

/// Marks settlement notices written delivered pending again.
pub fn reopen_notices(conn: &Conn, mailbox_ids: &[i64]) -> Result<()> {
    let stmt = q!("agent_notice_reopen");
    for id in mailbox_ids {
        conn.execute(stmt, params![id])?;
    }
    Ok(())
}

/// Marks a thread's pending notices for `recipient` delivered without sending them.
pub fn supersede_notices(
    conn: &Conn,
    thread_id: &ThreadId,
    recipient: &str,
    at: &str,
) -> Result<()> {
    conn.execute(
        q!("agent_notices_supersede"),
        named! {":at": at, ":id": thread_id, ":recipient": recipient},
    )?;
    Ok(())
}

columns! {
    /// A pending steering message (`{agent_steer_row}` in `sql/agent_steers_pending.sql`,
    /// which reads `mailbox`): what [`PendingSteer`] holds.
    pub mod steer_col as "{agent_steer_row}" {
        ID = "id",
        BODY = "body",
        CREATED_AT = "created_at",
        SENT_TO = "message_id",
    }
}

/// A pending steering message.
pub struct PendingSteer {
    pub id: i64,
    pub body: String,
    pub created_at: String,
    /// The launch it was sent to (`None` while unsent).
    pub sent_to: Option<String>,
}

/// A thread's steering messages not yet consumed, oldest first.
pub fn pending_steers(conn: &Conn, thread_id: &ThreadId) -> Result<Vec<PendingSteer>> {
    let rows = conn
        .all(
            q!("agent_steers_pending", steer_col),
            params![thread_id],
            |r| {
                Ok(PendingSteer {
                    id: r.get(steer_col::ID)?,
                    body: r.get(steer_col::BODY)?,
                    created_at: r.get(steer_col::CREATED_AT)?,
                    sent_to: r.get(steer_col::SENT_TO)?,
                })
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

/// A steering message was accepted by the run of launch `launch_seq`.
pub fn steer_sent(conn: &Conn, mailbox_id: i64, launch_seq: i64) -> Result<()> {
    conn.execute(
        q!("agent_steer_sent"),
        named! {":launch": launch_seq.to_string(), ":id": mailbox_id},
    )?;
    Ok(())
}

/// The threads of a registry `owner` holds with steering not yet sent to their current run.
pub fn owned_pending_steers(
    conn: &Conn,
    registry: ManagerId,
    owner: ProcessIdentity,
) -> Result<Vec<ThreadId>> {
    ids(conn, q!("agent_owned_pending_steers"), registry, owner)
}

columns! {
    /// A notice due to an agent path (`{agent_notice_row}` in `sql/agent_notices_pending.sql`,
    /// which reads `mailbox mb JOIN threads t`): what [`PendingNotice`] holds.
    pub mod notice_col as "{agent_notice_row}" {
        ID = "mb.id",
        THREAD_ID = "mb.thread_id",
        KIND = "mb.kind",
        BODY = "mb.body",
        CREATED_AT = "mb.created_at",
        DETAILS = "mb.details",
        PATH = "t.path",
        AGENT_STATE = "t.agent_state",
    }
}

/// A notice due to an agent path.
pub struct PendingNotice {
    pub id: i64,
    pub thread_id: ThreadId,
    pub kind: MailKind,
    pub body: String,
    pub created_at: String,
    /// Structured details (JSON) beyond the text: a timeout's `timeoutMs` and `recentOutput`.
    pub details: Option<String>,
    /// The thread's path and lifecycle state now.
    pub path: String,
    pub state: Option<String>,
}

/// The notices due to `recipient` in a registry, oldest first.
pub fn pending_notices(
    conn: &Conn,
    registry: ManagerId,
    recipient: &str,
) -> Result<Vec<PendingNotice>> {
    let rows = conn
        .all(
            q!("agent_notices_pending", notice_col),
            params![registry, recipient],
            |r| {
                Ok(PendingNotice {
                    id: r.get(notice_col::ID)?,
                    thread_id: r.get(notice_col::THREAD_ID)?,
                    kind: r.get(notice_col::KIND)?,
                    body: r.get(notice_col::BODY)?,
                    created_at: r.get(notice_col::CREATED_AT)?,
                    details: r.get(notice_col::DETAILS)?,
                    path: r.get(notice_col::PATH)?,
                    state: r.get(notice_col::AGENT_STATE)?,
                })
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}
