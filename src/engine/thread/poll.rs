//! `poll`: a thread's answer rendered from its rows (a live one refreshed first). It writes
//! nothing of its own: a thread whose serve died is closed by a watcher's restore pass.

use super::{refresh_if_live, scope, Engine};
use crate::contract::projection::Detail;
use crate::contract::thread::poll_result;
use crate::error::Result;
use crate::serve::output::Reply;
use crate::store::refs::resolve;

pub(super) async fn poll(e: &Engine, reference: &str, detail: Detail) -> Result<Reply> {
    let row = {
        let conn = e.store.read()?;
        resolve(&conn, scope(e), reference)?
    };
    // A thread another serve holds is read from its rows; one whose serve died stays as its
    // rows say until a watcher's restore pass closes it (reads never write).
    if row.is_live() {
        refresh_if_live(e, &row.id).await;
    }
    let facts = e.facts(&row.id)?;
    Ok(Reply::Json(poll_result(&facts, detail)?))
}
