//! `threads_hide`: sets the hidden override of one of this coordinator's workers.

use super::{json_of, load, owned, Json};
use crate::engine::Engine;
use crate::error::Result;
use crate::store::workers;

pub(super) fn hide(e: &Engine, worker_id: &str) -> Result<Json> {
    let row = owned(e, worker_id)?;
    e.store
        .write(|tx| workers::set_hidden(tx, row.id(), true))?;
    json_of(&load(e, row.id())?.facts.view())
}
