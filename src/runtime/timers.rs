//! A child's deadlines: `PI_THREADS_IDLE_CLEANUP_MS` (idle this long) and
//! `PI_THREADS_LIVE_TIMEOUT_MS` (this long after its launch) each end in a graceful stop.
//! One task per child, woken by its view, so a timer never polls.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::child::Child;
use super::mapping::Phase;
use super::stop::StopBy;
use super::Runtime;

/// Timers from the environment (`PI_THREADS_IDLE_CLEANUP_MS`, `PI_THREADS_LIVE_TIMEOUT_MS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Stop a child idle (nothing pending) this long. `None` disables.
    pub idle_cleanup: Option<Duration>,
    /// Stop a child this long after its launch. `None` disables.
    pub live_timeout: Option<Duration>,
    /// A busy child silent this long is `stalled` (`THREADBASE_STALL_MS`; `None`: the view's
    /// default, 300000 ms), recorded on each launch's row.
    pub stall: Option<Duration>,
    /// Stop a child stalled this long (`THREADBASE_INACTIVITY_TIMEOUT_MS`). `None` disables.
    pub inactivity_timeout: Option<Duration>,
}

/// Stops a child when its idle-cleanup or live-timeout deadline passes.
pub(super) async fn run_timers(rt: Runtime, child: Arc<Child>) {
    let cfg = rt.inner.config;
    if cfg.idle_cleanup.is_none() && cfg.live_timeout.is_none() {
        return;
    }
    let launched = Instant::now();
    let mut view = child.view.subscribe();
    loop {
        let v = view.borrow_and_update().clone();
        if v.closed || v.phase == Phase::Stopping {
            return;
        }
        let live_deadline = cfg.live_timeout.map(|d| launched + d);
        let idle_deadline = match (cfg.idle_cleanup, v.phase, v.idle_since) {
            (Some(d), Phase::Idle, Some(since)) => Some(since + d),
            _ => None,
        };
        let next = [live_deadline, idle_deadline].into_iter().flatten().min();
        tokio::select! {
            changed = view.changed() => if changed.is_err() { return },
            _ = sleep_until_opt(next) => {
                let _ = rt.stop(&child.thread_id, false, StopBy::Other).await;
                return;
            }
        }
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
