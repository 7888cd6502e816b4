//! `agent_output`: a page of a completed run's answer.

use super::{answer, AgentHost};
use crate::contract::agent::{self as contract, AgentState};
use crate::domain::ManagerId;
use crate::error::Result;
use crate::paths::{self, ROOT};

impl AgentHost {
    pub(super) fn output(
        &self,
        registry: ManagerId,
        path: &str,
        offset: usize,
        limit: usize,
    ) -> Result<Vec<u8>> {
        let path = paths::resolve_agent_path(path, self.caller())?;
        self.check_access(&path, true)?;
        if path == ROOT {
            // Only the root reads itself: the main session has no answer to page.
            return answer(&contract::output_page(ROOT, "", offset, limit));
        }
        let row = self.known(registry, &path)?;
        // Only a completed run hands back an answer (none from a paused turn).
        let out = match row.state {
            AgentState::Completed => row.output.as_deref().unwrap_or(""),
            _ => "",
        };
        answer(&contract::output_page(&row.path, out, offset, limit))
    }
}
