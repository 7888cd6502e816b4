//! `agent_wait`: the thread's view once it is not working (or the timeout passed), its
//! notices for the caller held back meanwhile so the settlement is not reported twice.

use crate::domain::ThreadId;
use crate::engine::Reply;
use std::time::{Duration, Instant};

use super::{Agents, Engine, WAIT_POLL};
use crate::contract::agent as contract;
use crate::error::Result;
use crate::paths;
use crate::store::agents::AgentRow;

impl Agents<'_> {
    /// Waits until the thread is not working (or the timeout passes) and returns it. It reads
    /// rows only: a thread whose serve died is paused by a watcher's restore pass (every serve
    /// runs one each second), and the wait then sees it settled.
    pub(super) async fn wait_settled(
        &self,
        id: &ThreadId,
        timeout_ms: Option<u64>,
    ) -> Result<AgentRow> {
        let deadline = timeout_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        loop {
            let row = self.row_by_id(id)?;
            if !row.active() || deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(row);
            }
            let nap = match deadline {
                Some(d) => WAIT_POLL.min(d.saturating_duration_since(Instant::now())),
                None => WAIT_POLL,
            };
            tokio::time::sleep(nap).await;
        }
    }
}

pub(in crate::engine) async fn wait(e: &Engine, req: contract::Wait) -> Result<Reply> {
    let e = &Agents(e);
    let registry = e.registry()?;
    let path = req.path.as_str();
    let timeout_ms = req.timeout_ms;
    let path = paths::resolve_agent_path(path, e.caller())?;
    e.check_access(&path, false)?;
    let row = e.known(registry, &path)?;
    let _held = e.hold_notices(&row.id);
    let row = e.wait_settled(&row.id, timeout_ms).await?;
    e.reported(row)
}
