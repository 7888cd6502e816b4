//! `threads_list`: this coordinator's workers, hidden ones included, oldest first.

use super::{facts_of, tool_result};
use crate::contract::worker::Workers;
use crate::engine::Engine;
use crate::engine::Reply;
use crate::error::Result;
use crate::store::workers;

pub(in crate::engine) fn list(e: &Engine) -> Result<crate::engine::Reply> {
    let conn = e.store.read()?;
    let rows = workers::workers_of_coordinator(&conn, &e.cfg.session_id)?;
    {
        let hosts = crate::store::facts::HostCheck::of(e.store.hosts_to_check());
        let facts = facts_of(&conn, rows, hosts)?;
        Ok(Reply::shaped(move |w| tool_result(w, &Workers::of(&facts))))
    }
}
