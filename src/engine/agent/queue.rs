//! Contract B's durable queue (`THREADBASE_QUEUE=1`, issue 30). An `agent_spawn` over
//! `PI_SUBAGENTS_MAX_CONCURRENT` working threads reserves its row as usual (its path taken,
//! `starting`) and marks it queued; its status is `Queued (position N)`. When the rows change
//! (a thread settled, was stopped or paused), [`Engine::agent_queue_changed`] claims the free slots
//! for the oldest queued rows in one transaction that counts them
//! (`sql/agent_queue_claim.sql`) and launches them in order, as a detached spawn does. A claimed
//! row never launched (its serve died between the two) is launched by the next serve.

use super::Engine;
use crate::contract::agent::AgentState;
use crate::domain::ThreadId;
use crate::error::{Error, Result};
use crate::paths::ROOT;
use crate::store::agents;
use crate::store::queue::{self, QueueState};
use crate::time::now_iso;

impl Engine {
    /// See the module docs; a task of its own, nothing when the queue is off.
    pub(crate) fn agent_queue_changed(&self) {
        if !self.cfg.settings.queue {
            return;
        }
        let host = self.arc();
        tokio::spawn(tracing::Instrument::in_current_span(async move {
            if let Err(e) = host.drain().await {
                tracing::warn!("launching queued subagents failed: {e}");
            }
        }));
    }

    async fn drain(&self) -> Result<()> {
        let _one = self.agent.queue.clone().lock_owned().await;
        let Some(registry) = self.existing_registry(&self.store.read()?)? else {
            return Ok(());
        };
        let waiting = !queue::waiting(&self.store.read()?, registry)?.is_empty();
        if waiting {
            let max = self.cfg.settings.agent_limits.max_concurrent;
            self.store
                .write(|tx| queue::claim_agents(tx, registry, max, &now_iso()))?;
        }
        for id in queue::to_launch(&self.store.read()?, registry)? {
            if self.rt.is_live(&id) {
                continue;
            }
            if let Err(e) = self.launch_queued(registry, &id).await {
                tracing::warn!(thread = %id, "a queued subagent failed to launch: {e}");
            }
        }
        Ok(())
    }

    /// Launches the claimed row `id`: its session file (a snapshot of its parent's branch, as
    /// at a spawn) and its first run with its task. A launch that fails settles it as failed.
    async fn launch_queued(&self, registry: crate::domain::ManagerId, id: &ThreadId) -> Result<()> {
        let _launching = self.rt.reserve_launch(id);
        if queue::state(&self.store.read()?, id)? != QueueState::Claimed {
            return Ok(());
        }
        let row = self.row_by_id(id)?;
        let parent_row = match row.parent_path.as_deref() {
            Some(p) if p != ROOT => agents::thread_at_path(&self.store.read()?, registry, p)?,
            _ => None,
        };
        let started = async {
            let file = self.write_child_session(id, &row.path, &row.name, parent_row.as_ref())?;
            self.launch(id, row.task.clone(), Some(file)).await?;
            Ok::<_, Error>(())
        }
        .await;
        if let Err(e) = started {
            self.store.write(|tx| {
                crate::store::launches::close_unlaunched(tx, id, &e.message).map(drop)
            })?;
            self.settle(id, AgentState::Failed, None, Some(e.message.clone()))?;
            return Err(e);
        }
        Ok(())
    }
}
