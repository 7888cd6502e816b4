//! `poll`: a closed thread's kept answer (the snapshot cache, `engine/cache.rs`), or its answer
//! rendered from its rows (a live one held here refreshed first). It writes nothing of its
//! own: a thread whose serve died is closed by a watcher's restore pass.

use super::{Engine, REFRESH_TIMEOUT};
use crate::contract::thread::{poll_result, Poll};
use crate::engine::Reply;
use crate::error::Result;
use crate::store::facts::{self, Found};
use crate::store::snapshots::View;

pub(in crate::engine) async fn poll(e: &Engine, Poll { id, detail }: Poll) -> Result<Reply> {
    let found = facts::find(
        &e.store.read()?,
        e.scope(),
        &id,
        View::Poll,
        detail.as_str(),
    )?;
    let row = match found {
        // Kept JSON, written as it is.
        Found::Kept(json) => return Ok(Reply::shaped(move |w| Ok(w.write_all(json.as_bytes())?))),
        Found::Row(row) => row,
    };
    // A live child held here is asked for its state first; one another serve holds is read
    // from its rows (its serve refreshes it), and one whose serve died stays as its rows say
    // until a watcher's restore pass closes it (reads never write).
    if row.is_live() {
        let _ = e.rt.refresh(&row.id, REFRESH_TIMEOUT).await;
    }
    let facts = e.facts(&row.id)?;
    if !facts.row.is_live() {
        e.cache.missed([(facts.row.id.clone(), View::Poll, detail)]);
    }
    Ok(Reply::shaped(move |w| poll_result(w, &facts, detail)))
}
