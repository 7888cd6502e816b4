//! Typed access to `mailbox`: one insert for every contract's rows, and the rows a session's
//! caller receives (completion and progress notices and worker reports: direction
//! `to_parent`, no agent recipient), which the row watcher emits. Contract B's notices and
//! steering are read in [`super::agents::mailbox`]; contract C's keyed messages in
//! [`super::workers`].

use crate::store::db::{named, params, q};
use crate::store::Conn;

pub use crate::domain::{Direction, MailKind, MailState};
use crate::domain::{SessionId, ThreadId};
use crate::error::Result;
use crate::store::rows::columns;
use crate::time::now_iso;

/// A new mailbox row.
pub struct NewMail<'a> {
    pub thread_id: &'a ThreadId,
    pub direction: Direction,
    pub kind: MailKind,
    /// One row per thread and key: a second row under the same key is not written.
    pub send_key: &'a str,
    /// Contract C's message id.
    pub message_id: Option<&'a str>,
    pub body: &'a str,
    /// Contract B: the agent path a notice is for.
    pub recipient: Option<&'a str>,
    pub at: &'a str,
    /// Written delivered (a settlement the writing serve's request reports itself), else
    /// pending.
    pub delivered: bool,
}

/// Writes a mailbox row; its id, or `None` when its thread has a row under its send key
/// already (the caller compares them, if it must, in the same transaction).
pub fn insert(conn: &Conn, m: &NewMail<'_>) -> Result<Option<i64>> {
    let state = if m.delivered {
        MailState::Delivered
    } else {
        MailState::Pending
    };
    conn.opt(
        q!("mailbox_insert"),
        named! {
            ":thread_id": m.thread_id, ":direction": m.direction, ":kind": m.kind,
            ":send_key": m.send_key, ":message_id": m.message_id, ":body": m.body,
            ":recipient": m.recipient, ":at": m.at, ":state": state,
        },
        |r| r.get(0),
    )
}

columns! {
    /// A notice due to a session's caller (`{notice_row}` in `sql/notices_pending.sql`, which
    /// reads `mailbox mb CROSS JOIN threads t`): what [`Notice`] holds.
    pub mod notice_col as "{notice_row}" {
        ID = "mb.id",
        THREAD_ID = "mb.thread_id",
        KIND = "mb.kind",
        MESSAGE_ID = "mb.message_id",
        BODY = "mb.body",
        CREATED_AT = "mb.created_at",
        PATH = "t.path",
    }
}

/// One notice due to a session's caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub id: i64,
    pub thread_id: ThreadId,
    pub kind: MailKind,
    pub message_id: Option<String>,
    pub body: String,
    pub created_at: String,
    /// The thread's path.
    pub path: String,
}

/// The send key of a message a serve delivered into a thread (issue 50): `sent:<random>:<by>`,
/// so the thread's detail can say who sent it (the mailbox has no column for it).
fn sent_key(by: &str) -> String {
    format!("sent:{}:{by}", crate::ids::random_hex(8))
}

/// Who sent a message, from its send key (`None` for keys of other rows).
pub fn sender_of_key(key: &str) -> Option<String> {
    let rest = key.strip_prefix("sent:")?;
    rest.split_once(':').map(|(_, by)| by.to_string())
}

/// Records a message a serve delivered into thread `id` (a contract A send: the tool's, or a
/// web page's through a `commands` row) as a delivered `to_child` row naming who sent it.
pub fn record_sent(
    store: &crate::Store,
    id: &ThreadId,
    kind: MailKind,
    body: &str,
    by: &str,
) -> Result<()> {
    let key = sent_key(by);
    let at = now_iso();
    store.write(|tx| {
        insert(
            tx,
            &NewMail {
                thread_id: id,
                direction: Direction::ToChild,
                kind,
                send_key: &key,
                message_id: None,
                body,
                recipient: None,
                at: &at,
                delivered: true,
            },
        )
        .map(|_| ())
    })
}

/// The notices due to the caller of session `session_id`, oldest first.
pub fn pending_notices(conn: &Conn, session_id: &SessionId) -> Result<Vec<Notice>> {
    let rows = conn
        .all(
            q!("notices_pending", notice_col),
            params![session_id],
            |r| {
                Ok(Notice {
                    id: r.get(notice_col::ID)?,
                    thread_id: r.get(notice_col::THREAD_ID)?,
                    kind: r.get(notice_col::KIND)?,
                    message_id: r.get(notice_col::MESSAGE_ID)?,
                    body: r.get(notice_col::BODY)?,
                    created_at: r.get(notice_col::CREATED_AT)?,
                    path: r.get(notice_col::PATH)?,
                })
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

/// Claims a pending notice for delivery; only the claim that changes the row may emit it.
pub fn claim_notice(conn: &Conn, id: i64) -> Result<bool> {
    Ok(conn.execute(q!("notice_delivered"), params![id, now_iso()])? > 0)
}
