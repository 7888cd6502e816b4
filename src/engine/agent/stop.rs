//! `agent_stop`: the target in any state and its working descendants, deepest level first,
//! across processes (a run another serve holds is stopped through a `commands` row).

use crate::engine::Reply;
use crate::runtime::StopBy;
use std::time::{Duration, Instant};

use super::{Agents, Engine};
use crate::contract::agent::{self as contract, AgentState};
use crate::error::Result;
use crate::paths;
use crate::store::agents::{self, StopTarget};
use crate::store::commands::{self, CommandKind};
use crate::time::now_iso;

/// How long `agent_stop` waits for each level of targets to settle.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// Stops the target, in any state, and its working descendants, deepest first, across
/// processes. A stopped target refuses spawns and steers beneath it until it is resumed.
pub(in crate::engine) async fn stop(e: &Engine, req: contract::Stop) -> Result<Reply> {
    let e = &Agents(e);
    let registry = e.registry()?;
    let path = req.path.as_str();
    let path = paths::resolve_agent_path(path, e.caller())?;
    e.check_access(&path, false)?;
    let target = e.known(registry, &path)?;
    // The result is the stopped view: no "stopped" notice for what the caller did itself.
    let _held = e.hold_notices(&target.id);
    let (lo, hi) = paths::descendant_range(&path);
    let targets: Vec<StopTarget> = e.store.write(|tx| {
        let mut rows = agents::stop_targets(tx, registry, &path, &lo, &hi)?;
        for t in &mut rows {
            // A thread waiting in the queue (THREADBASE_QUEUE=1) is taken out of it and
            // closed, stopped, never launched.
            if t.active
                && crate::store::queue::dequeue_agent(
                    tx,
                    registry,
                    &t.id,
                    contract::STATUS_STOPPED,
                    &now_iso(),
                )?
            {
                t.active = false;
                t.live = false;
                continue;
            }
            if t.active {
                agents::request_stop(tx, &t.id, contract::STATUS_STOPPING, &now_iso())?;
            } else {
                // At once, in this transaction: from here on nothing spawns or resumes
                // beneath it.
                agents::stop_settled(tx, &t.id, contract::STATUS_STOPPED, &now_iso())?;
            }
        }
        Ok(rows)
    })?;
    // Deepest level first, so a child's own serve stops its children before it goes.
    let mut levels: Vec<(usize, Vec<&StopTarget>)> = Vec::new();
    for t in &targets {
        let depth = paths::segment_count(&t.path);
        match levels.last_mut() {
            Some((d, level)) if *d == depth => level.push(t),
            _ => levels.push((depth, vec![t])),
        }
    }
    for (_, level) in levels {
        let mut ids = Vec::new();
        for StopTarget {
            id, live, active, ..
        } in level
        {
            if !active {
                // The settled target, stopped in the transaction above: no run to end. Its
                // process (if it still hosts the descendants stopped above) retires.
                e.retire_if_done(id).await?;
                continue;
            }
            // A run whose launch is under way here is stopped once its child exists.
            e.rt.await_launch(id, crate::runtime::LAUNCH_WAIT).await;
            let row = e.row_by_id(id)?;
            if e.rt.is_live(id) {
                let engine = e.arc();
                let id = id.clone();
                tokio::spawn(async move {
                    let _ = engine.rt.stop(&id, false, StopBy::Caller).await;
                });
            } else if *live && e.owner_alive(&row) {
                e.store
                    .write(|tx| commands::request(tx, id, CommandKind::Stop))?;
            } else {
                // No process anywhere (a run reserved but not started, or an owner that
                // is gone): settled at once.
                e.settle_run(id, AgentState::Stopped, None, None)?;
            }
            ids.push(id.clone());
        }
        let deadline = Instant::now() + STOP_WAIT;
        for id in ids {
            let left = deadline.saturating_duration_since(Instant::now());
            e.wait_settled(&id, Some(left.as_millis() as u64)).await?;
        }
    }
    let row = e.row_by_id(&target.id)?;
    e.reported(row)
}
