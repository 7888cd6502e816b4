//! `poll`: a closed thread's kept answer (the snapshot cache, `engine/cache.rs`), or its answer
//! rendered from its rows (a live one refreshed first). It writes nothing of its own: a thread
//! whose serve died is closed by a watcher's restore pass.

use super::{refresh_if_live, scope, Engine};
use crate::contract::thread::poll_result;
use crate::engine::Reply;
use crate::error::Result;
use crate::store::refs::resolve;
use crate::store::snapshots::{self, View};

pub(in crate::engine) async fn poll(
    e: &Engine,
    req: crate::contract::thread::Poll,
) -> Result<Reply> {
    let (reference, detail) = (req.id.as_str(), req.detail);
    let row = {
        let conn = e.store.read()?;
        let row = resolve(&conn, scope(e), reference)?;
        // A closed thread's answer changes only with its rows: a cached one is current.
        if !row.is_live() {
            if let Some((json, _)) = snapshots::cached(&conn, &row.id, View::Poll, detail.as_str())?
            {
                // Kept JSON, written as it is.
                return Ok(Reply::shaped(move |w| Ok(w.write_all(json.as_bytes())?)));
            }
        }
        row
    };
    // A thread another serve holds is read from its rows; one whose serve died stays as its
    // rows say until a watcher's restore pass closes it (reads never write).
    if row.is_live() {
        refresh_if_live(e, &row.id).await;
    }
    let facts = e.facts(&row.id)?;
    if !facts.row.is_live() {
        e.cache.missed([(facts.row.id.clone(), View::Poll, detail)]);
    }
    Ok(Reply::shaped(move |w| poll_result(w, &facts, detail)))
}
