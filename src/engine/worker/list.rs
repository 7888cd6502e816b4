//! `threads_list`: this coordinator's workers, hidden ones included, oldest first.

use super::{answer, facts_of};
use crate::contract::worker::Workers;
use crate::engine::Engine;
use crate::error::Result;
use crate::store::workers;

pub(in crate::engine) fn list(e: &Engine) -> Result<crate::engine::Reply> {
    let conn = e.store.read()?;
    let rows = workers::workers_of_coordinator(&conn, &e.cfg.session_id)?;
    answer(&Workers::of(&facts_of(&conn, rows)?))
}
