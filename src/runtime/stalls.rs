//! Stalls (issue 45): a busy child that says nothing for its `stall_ms` reads `stalled` on
//! every surface (the view `thread_attention` judges it from `thread_output.activity_at`;
//! nothing is written for it, and the child's next line makes it busy again). The serve that
//! holds the child tells a contract A parent once per stall, and with
//! `THREADBASE_INACTIVITY_TIMEOUT_MS` stops a child stalled that long, saying why in its exit.
//! The row watcher runs [`Runtime::check_stalls`] every second.

use std::sync::Arc;

use super::mapping::Phase;
use super::stop::StopBy;
use super::Runtime;
use crate::domain::{Attention, ThreadId};
use crate::error::Result;
use crate::store::{attention, events, notices, ThreadIds};
use crate::time::{ms_from_iso, now_iso, now_ms};

impl Runtime {
    /// Reads what needs the user about this serve's busy children (one query, none when no
    /// child is busy); tells the parent of each newly stalled contract A thread, and stops a
    /// child stalled past the inactivity timeout.
    pub async fn check_stalls(&self) -> Result<()> {
        let busy: Vec<Arc<super::child::Child>> = self
            .children()
            .into_iter()
            .filter(|c| {
                let v = c.view.borrow();
                !v.closed && v.phase == Phase::Busy
            })
            .collect();
        if busy.is_empty() {
            return Ok(());
        }
        let store = self.inner.store.clone();
        let ids: Vec<ThreadId> = busy.iter().map(|c| (*c.thread_id).clone()).collect();
        let needs = tokio::task::spawn_blocking(move || -> Result<_> {
            let conn = store.read()?;
            attention::of_threads(&conn, &ThreadIds::new(&ids)?)
        })
        .await
        .map_err(|e| crate::error::Error::internal(format!("the stall check stopped: {e}")))??;
        for (child, need) in busy.into_iter().zip(needs) {
            let Some(need) = need.filter(|n| n.attention == Attention::Stalled) else {
                continue;
            };
            let since = need.since.clone().unwrap_or_default();
            let first = {
                let mut told = child.stall_told.lock().unwrap_or_else(|p| p.into_inner());
                let first = told.as_deref() != Some(since.as_str());
                *told = Some(since.clone());
                first
            };
            if first {
                let (tid, since) = (child.thread_id.clone(), since.clone());
                self.inner
                    .ingest
                    .write(move |tx| {
                        let last = events::rows_of_thread(tx, &tid)?
                            .last()
                            .map(|e| format!("{} at {}", e.kind, e.at));
                        notices::stalled(tx, &tid, &since, last.as_deref(), &now_iso())?;
                        Ok(())
                    })
                    .await?;
            }
            let Some(limit) = self.inner.config.inactivity_timeout else {
                continue;
            };
            let silent_ms = ms_from_iso(&since).map_or(0, |t| now_ms() - t);
            if silent_ms >= limit.as_millis() as i64 {
                *child.stop_reason.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!(
                    "Stopped: nothing came from the child for {}s while it was busy (THREADBASE_INACTIVITY_TIMEOUT_MS={}).",
                    silent_ms / 1000,
                    limit.as_millis()
                ));
                let rt = self.clone();
                tokio::spawn(async move {
                    if let Err(e) = rt.stop(&child.thread_id, false, StopBy::Other).await {
                        tracing::warn!("stopping stalled {} failed: {e}", child.thread_id);
                    }
                });
            }
        }
        Ok(())
    }

    /// Stops a live child for a reason of the runtime's own (issue 49: a cap), which becomes
    /// its exit's message; false when it was not live here.
    pub async fn stop_for(&self, thread_id: &ThreadId, reason: String, by: StopBy) -> Result<bool> {
        let Some(child) = self.child(thread_id) else {
            return Ok(false);
        };
        *child.stop_reason.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason);
        self.stop(thread_id, false, by).await
    }
}
