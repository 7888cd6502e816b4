//! `agent_wait`: the thread's view once it is not working (or the timeout passed), its
//! notices for the caller held back meanwhile so the settlement is not reported twice.

use crate::domain::ManagerId;
use std::time::{Duration, Instant};

use super::{AgentHost, WAIT_POLL};
use crate::error::Result;
use crate::paths;
use crate::store::agents::AgentRow;

impl AgentHost {
    pub(super) async fn wait(
        &self,
        registry: ManagerId,
        path: &str,
        timeout_ms: Option<u64>,
    ) -> Result<Vec<u8>> {
        let path = paths::resolve_agent_path(path, self.caller())?;
        self.check_access(&path, false)?;
        let row = self.known(registry, &path)?;
        let _held = self.hold_notices(&row.id);
        let row = self.wait_settled(&row.id, timeout_ms).await?;
        self.reported(row)
    }

    /// Waits until the thread is not working (or the timeout passes) and returns it. It reads
    /// rows only: a thread whose serve died is paused by a watcher's restore pass (every serve
    /// runs one each second), and the wait then sees it settled.
    pub(super) async fn wait_settled(&self, id: &str, timeout_ms: Option<u64>) -> Result<AgentRow> {
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
