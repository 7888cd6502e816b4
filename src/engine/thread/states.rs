//! `thread.states {ids}`: each thread's state in words (`live/busy`, `live/asking`,
//! `closed/failed`, …), spelled by [`crate::domain::state_words`] from its row and what the view
//! `thread_attention` says of it, so the Pi extension's `/threads` shows the words every other
//! surface shows instead of deriving its own. Not a model tool: the extension's own method.

use serde::Serialize;

use super::Engine;
use crate::contract::request::ThreadStates;
use crate::engine::Reply;
use crate::error::Result;
use crate::store::{attention, threads, ThreadIds};

/// `thread.states`' answer: the words of each asked id, in the order asked; `null` for an id
/// no thread has.
#[derive(Debug, Serialize)]
pub struct States {
    pub states: Vec<Option<String>>,
}

pub(in crate::engine) fn states(e: &Engine, req: ThreadStates) -> Result<Reply> {
    if req.ids.is_empty() {
        return Ok(Reply::of(States { states: Vec::new() }));
    }
    let conn = e.store.read()?;
    let rows = threads::threads_by_ids(&conn, &req.ids)?;
    let needs = attention::of_threads(&conn, &ThreadIds::new(rows.iter().map(|r| &r.id))?)?;
    let words: std::collections::HashMap<_, _> = rows
        .iter()
        .zip(needs)
        .map(|(row, need)| (&row.id, row.state_words(need.map(|n| n.attention))))
        .collect();
    let states = req.ids.iter().map(|id| words.get(id).cloned()).collect();
    Ok(Reply::of(States { states }))
}
