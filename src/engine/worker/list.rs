//! `threads_list`: this coordinator's workers, hidden ones included, oldest first.

use super::{answer, facts_of};
use crate::contract::worker::Workers;
use crate::engine::Engine;
use crate::error::Result;
use crate::store::workers;

pub(in crate::engine) fn list(e: &Engine) -> Result<crate::serve::output::Reply> {
    let rows = workers::workers_of_coordinator(&*e.store.read()?, &e.cfg.session_id)?;
    answer(&Workers::of(&facts_of(rows)))
}
