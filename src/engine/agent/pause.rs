//! `agent_pause`: a working child asks to pause itself at the end of its turn.

use super::{Agents, Engine};
use crate::contract::agent as contract;
use crate::engine::Reply;
use crate::error::Result;
use crate::store::agents;
use crate::time::now_iso;

/// A working child asks to pause: it settles as paused when this run ends (the tool
/// result carries `terminate: true`, which ends the run at the turn boundary).
pub(in crate::engine) fn pause(e: &Engine, req: contract::Pause) -> Result<Reply> {
    let e = &Agents(e);
    let registry = e.registry()?;
    let reason = req.reason.as_str();
    let me = e.working_self(registry, "Only a working child may pause itself")?;
    let status = if reason.trim().is_empty() {
        contract::STATUS_PAUSED_DEFAULT.to_string()
    } else {
        reason.trim().to_string()
    };
    e.store
        .write(|tx| agents::request_pause(tx, &me.id, &status, &now_iso()))?;
    // `terminate`: the extension returns it as the tool result's, ending the run.
    Ok(Reply::shaped(move |w| {
        contract::tool_result(
            w,
            &contract::Paused {
                path: &me.path,
                pause_requested: true,
                status: &status,
            },
            true,
        )
    }))
}
