//! The restore pass: one function that gives every thread left live by a dead owner a safe
//! value. A thread whose owning process (pid + start time) is gone becomes closed with a
//! `stale` exit (contract B: `paused`, "Interrupted by reload; send input to resume"); its
//! process group is killed only when the recorded pid is still the same process (pid and
//! start time match). When that process is gone (or was never recorded), the processes it
//! left behind are killed one by one, each proven the thread's by the thread id in its
//! environment (`process::kill_thread_leftovers`). Each thread is one transaction. Nothing is
//! restarted.

use rusqlite::named_params;
use serde_json::json;

use super::process::{kill_recorded_group, kill_thread_leftovers, ProcessIdentity};
use crate::error::Result;
use crate::store::events::{self, NewEvent};
use crate::store::Store;
use crate::time::now_iso;

/// The stale exit message (contract A's text).
pub const STALE_MESSAGE: &str =
    "Thread was restored from the parent Pi session registry without a live process connection.";
/// Contract B's status for interrupted work.
pub const PAUSED_STATUS: &str = "Interrupted by reload; send input to resume";

/// What a restore pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Threads closed as stale (or paused).
    pub restored: Vec<String>,
    /// Process groups that survived their owner and were killed.
    pub killed_groups: Vec<i64>,
}

struct Candidate {
    id: String,
    pid: Option<i64>,
    pgid: Option<i64>,
    process_started_at: Option<i64>,
    owner: Option<ProcessIdentity>,
    launch_seq: i64,
}

/// Restores every live thread whose owner is not alive and is not `me`.
pub fn restore_dead_owners(store: &Store, me: ProcessIdentity) -> Result<RestoreReport> {
    let candidates: Vec<Candidate> = {
        let conn = store.read()?;
        let mut stmt = conn.prepare_cached(include_str!("../../sql/restore_candidates.sql"))?;
        let rows = stmt.query_map([], |r| {
            let owner_pid: Option<i64> = r.get("owner_pid")?;
            let owner_started: Option<i64> = r.get("owner_started_at")?;
            Ok(Candidate {
                id: r.get("id")?,
                pid: r.get("pid")?,
                pgid: r.get("pgid")?,
                process_started_at: r.get("process_started_at")?,
                owner: owner_pid.map(|pid| ProcessIdentity {
                    pid,
                    started_at: owner_started.unwrap_or(-1),
                }),
                launch_seq: r.get("launch_seq")?,
            })
        })?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let mut report = RestoreReport::default();
    for c in candidates {
        let owner_alive = c.owner.is_some_and(|o| o == me || o.is_alive());
        if owner_alive {
            continue;
        }
        match (c.pid, c.pgid) {
            (Some(pid), Some(pgid)) if kill_recorded_group(pid, pgid, c.process_started_at) => {
                report.killed_groups.push(pgid);
            }
            // The recorded process is gone (a child exits on its own when its owner's pipes
            // close) or was never recorded (the owner died mid-launch): what it left behind
            // is found by the thread id in its environment.
            (_, pgid) => {
                if kill_thread_leftovers(pgid, &c.id) > 0 {
                    report.killed_groups.extend(pgid);
                }
            }
        }
        let changed = store.write(|tx| {
            let at = now_iso();
            let n = tx
                .prepare_cached(include_str!("../../sql/restore_close_stale.sql"))?
                .execute(named_params! {
                    ":message": STALE_MESSAGE, ":at": at, ":paused_status": PAUSED_STATUS,
                    ":id": c.id, ":launch": c.launch_seq,
                })?;
            if n > 0 {
                let data = json!({"exit": {"kind": "stale", "message": STALE_MESSAGE}}).to_string();
                events::append(
                    tx,
                    &c.id,
                    &[NewEvent {
                        at: &at,
                        kind: "thread_closed",
                        data: &data,
                    }],
                )?;
            }
            Ok(n > 0)
        })?;
        if changed {
            report.restored.push(c.id);
        }
    }
    Ok(report)
}
