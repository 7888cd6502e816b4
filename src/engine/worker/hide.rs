//! `threads_hide`: sets the hidden override of one of this coordinator's workers.

use super::{answer_worker, load, owned};
use crate::engine::Engine;
use crate::error::Result;
use crate::store::workers;

pub(in crate::engine) fn hide(
    e: &Engine,
    req: crate::contract::worker::WorkerRef,
) -> Result<crate::engine::Reply> {
    let row = owned(e, &req.worker_id)?;
    e.store
        .write(|tx| workers::set_hidden(tx, row.id(), true))?;
    answer_worker(load(e, &req.worker_id)?.facts)
}
