//! `threads_list`: this coordinator's workers, hidden ones included, oldest first.

use super::{facts_of, json_of, Json};
use crate::contract::worker::Workers;
use crate::engine::Engine;
use crate::error::Result;
use crate::store::workers;

pub(super) fn list(e: &Engine) -> Result<Json> {
    let conn = e.store.read()?;
    let rows = workers::workers_of_coordinator(&conn, &e.cfg.session_id)?;
    json_of(&Workers::of(&facts_of(&conn, rows)?))
}
