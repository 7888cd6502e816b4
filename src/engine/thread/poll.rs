//! `poll`: a closed thread's answer kept in this serve's memory (`engine/cache.rs`), or its
//! answer rendered from its rows (a live one held here refreshed first). It writes nothing of
//! its own: a thread whose serve died is closed by a watcher's restore pass.

use super::{Engine, REFRESH_TIMEOUT};
use crate::contract::thread::{poll_result, Poll};
use crate::engine::cache::{self, Key};
use crate::engine::Reply;
use crate::error::Result;
use crate::store::refs;

pub(in crate::engine) async fn poll(e: &Engine, Poll { id, detail }: Poll) -> Result<Reply> {
    // Read before the rows: an answer rendered from rows that changed after it is never kept.
    let at = e.cache.stamp();
    let key = Key::Poll(id.clone(), detail);
    if let Some(kept) = e.cache.get(&key, at) {
        return Ok(Reply::shaped(move |w| {
            Ok(w.write_all(kept.json.as_bytes())?)
        }));
    }
    let row = refs::resolve(&e.store.read()?, e.scope(), &id)?;
    // A live child held here is asked for its state first; one another serve holds is read
    // from its rows (its serve refreshes it), and one whose serve died stays as its rows say
    // until a watcher's restore pass closes it (reads never write).
    if row.is_live() {
        let _ = e.rt.refresh(&row.id, REFRESH_TIMEOUT).await;
    }
    let facts = e.facts(&row.id)?;
    if !cache::keepable(&facts, true) {
        return Ok(Reply::shaped(move |w| poll_result(w, &facts, detail)));
    }
    let answer = cache::render_poll(&facts, detail)?;
    e.cache.put(key, &answer, at);
    Ok(Reply::shaped(move |w| {
        Ok(w.write_all(answer.json.as_bytes())?)
    }))
}
