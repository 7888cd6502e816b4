//! `agent_output`: a page of a completed run's answer.

use super::{answer, Agents, Engine};
use crate::contract::agent::{self as contract, AgentState};
use crate::engine::Reply;
use crate::error::Result;
use crate::paths::{self, ROOT};

pub(in crate::engine) fn output(e: &Engine, req: contract::Output) -> Result<Reply> {
    let e = &Agents(e);
    let registry = e.registry()?;
    let contract::Output {
        path,
        offset,
        limit,
    } = req;
    let path = path.as_str();
    let path = paths::resolve_agent_path(path, e.caller())?;
    e.check_access(&path, true)?;
    if path == ROOT {
        // Only the root reads itself: the main session has no answer to page.
        return answer(contract::output_page(ROOT, "", offset, limit));
    }
    let row = e.known(registry, &path)?;
    Ok(Reply::shaped(move |w| {
        // Only a completed run hands back an answer (none from a paused turn).
        let out = match row.state {
            AgentState::Completed => row.output.as_deref().unwrap_or(""),
            _ => "",
        };
        contract::tool_result(
            w,
            &contract::output_page(&row.path, out, offset, limit),
            false,
        )
    }))
}
