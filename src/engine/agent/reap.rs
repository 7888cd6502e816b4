//! `/agents reap` (0.19): the main session forgets its completed threads that have no
//! descendant that stays, oldest first, in one transaction. A reaped thread frees its slot of
//! the total limit and cannot be resumed; its row (marked reaped), usage and session file stay.
//! A settled process this serve still holds for one of them is ended.

use crate::engine::Reply;

use super::{Agents, Engine};
use crate::contract::agent as contract;
use crate::error::{Error, Result};
use crate::runtime::StopBy;
use crate::store::agents::reap;
use crate::time::now_iso;

pub(in crate::engine) async fn reap(e: &Engine, req: contract::Reap) -> Result<Reply> {
    let e = &Agents(e);
    let registry = e.registry()?;
    let dry_run = req.dry_run;
    if !e.caller_is_root() {
        return Err(Error::forbidden(format!(
            "Only the main session may reap subagents. Repair: run /agents reap (or threadbase reap) in the main Pi session, not from {}.",
            e.caller()
        )));
    }
    let at = now_iso();
    let reaped = e.store.write(|tx| reap::reap(tx, registry, &at, dry_run))?;
    if !dry_run {
        for t in reaped.iter().filter(|t| t.live) {
            if e.rt.is_live(&t.id) {
                let _ = e.rt.stop(&t.id, false, StopBy::Caller).await;
            }
        }
    }
    Ok(Reply::shaped(move |w| {
        contract::tool_result(
            w,
            &contract::ReapResult {
                dry_run,
                count: reaped.len(),
                threads: reaped.iter().map(|t| t.path.as_str()).collect(),
            },
            false,
        )
    }))
}
