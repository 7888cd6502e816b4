//! `agent_pause`: a working child asks to pause itself at the end of its turn.

use super::AgentHost;
use crate::contract::agent as contract;
use crate::domain::ManagerId;
use crate::error::Result;
use crate::store::agents;
use crate::time::now_iso;

impl AgentHost {
    /// A working child asks to pause: it settles as paused when this run ends (the tool
    /// result carries `terminate: true`, which ends the run at the turn boundary).
    pub(super) fn pause(&self, registry: ManagerId, reason: &str) -> Result<Vec<u8>> {
        let me = self.working_self(registry, "Only a working child may pause itself")?;
        let status = if reason.trim().is_empty() {
            contract::STATUS_PAUSED_DEFAULT.to_string()
        } else {
            reason.trim().to_string()
        };
        self.store
            .write(|tx| agents::request_pause(tx, &me.id, &status, &now_iso()))?;
        // `terminate`: the extension returns it as the tool result's, ending the run.
        contract::tool_result(
            &contract::Paused {
                path: &me.path,
                pause_requested: true,
                status: &status,
            },
            true,
        )
    }
}
