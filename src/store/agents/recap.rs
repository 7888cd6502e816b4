//! Contract B's final recap (`finalRecap`, 0.19): detached children's results are held back as
//! pending mailbox rows (`recap_held`), so a crash loses none, and delivered as one notice once
//! the last outstanding detached child of their recipient has reported.

use crate::store::db::{named, q};
use crate::store::Conn;

use crate::domain::{ManagerId, ThreadId};
use crate::error::Result;
use crate::store::rows::columns;

/// Records whether a thread's current run is detached.
pub fn set_detached(conn: &Conn, id: &ThreadId, detached: bool) -> Result<()> {
    conn.execute(
        q!("agent_set_detached"),
        named! {":detached": detached, ":id": id},
    )?;
    Ok(())
}

/// Holds a written notice back for the recap.
pub fn hold(conn: &Conn, mailbox_id: i64) -> Result<()> {
    conn.execute(q!("agent_recap_hold"), named! {":id": mailbox_id})?;
    Ok(())
}

/// How many detached runs reporting to `recipient` still work.
pub fn outstanding(conn: &Conn, registry: ManagerId, recipient: &str) -> Result<i64> {
    conn.one(
        q!("agent_recap_outstanding"),
        named! {":registry": registry, ":recipient": recipient},
        |r| r.get(0),
    )
}

columns! {
    /// A result held back for the recap (`{agent_held_row}` in `sql/agent_recap_held.sql`,
    /// which reads `mailbox mb JOIN threads t`): what [`HeldResult`] holds.
    pub mod held_col as "{agent_held_row}" {
        ID = "mb.id",
        THREAD_ID = "mb.thread_id",
        BODY = "mb.body",
        PATH = "t.path",
        AGENT_STATE = "t.agent_state",
    }
}

/// A result held back for the recap.
pub struct HeldResult {
    pub id: i64,
    pub thread_id: ThreadId,
    pub body: String,
    pub path: String,
    pub state: Option<String>,
}

/// The results held for `recipient`, oldest first.
pub fn held(conn: &Conn, registry: ManagerId, recipient: &str) -> Result<Vec<HeldResult>> {
    let rows = conn
        .all(
            q!("agent_recap_held", held_col),
            named! {":registry": registry, ":recipient": recipient},
            |r| {
                Ok(HeldResult {
                    id: r.get(held_col::ID)?,
                    thread_id: r.get(held_col::THREAD_ID)?,
                    body: r.get(held_col::BODY)?,
                    path: r.get(held_col::PATH)?,
                    state: r.get(held_col::AGENT_STATE)?,
                })
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}
