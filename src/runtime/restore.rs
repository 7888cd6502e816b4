//! The restore pass: one function that gives every thread left live by a dead owner a safe
//! value. A thread whose owning process (pid + start time) is gone becomes closed with a
//! `stale` exit (contract B: `paused`), with the texts the caller passes (the contracts'); its
//! process group is killed only when the recorded pid is still the same process (pid and
//! start time match). When that process is gone (or was never recorded), the processes it
//! left behind are killed one by one, each proven the thread's by the thread id in its
//! environment (`process::kill_thread_leftovers`). Each thread is one transaction, except that
//! a contract B registry is restored all or nothing: one with a broken saved parent link is
//! refused whole and left unchanged. Nothing is restarted.
//!
//! Usage the dead owner never recorded (messages its child completed after the last committed
//! batch, or after the owner died) is read back from the thread's Pi session file once the
//! processes are gone, in the transaction that closes the thread (`store::usage::reconcile`).

use crate::domain::{Contract, ExitKind, ManagerId};
use rusqlite::named_params;
use serde_json::json;

use super::process::{kill_recorded_group, kill_thread_leftovers, GoneThread, ProcessIdentity};
use crate::error::Result;
use crate::store::agents;
use crate::store::events::{self, NewEvent};
use crate::store::usage::{self, Usage};
use crate::store::Store;
use crate::time::now_iso;

/// The texts a restore pass writes; they are the contracts' (`contract::RESTORE_TEXTS`).
#[derive(Debug, Clone, Copy)]
pub struct RestoreTexts {
    /// The stale exit message (contract A).
    pub stale_message: &'static str,
    /// Contract B's status for interrupted work.
    pub paused_status: &'static str,
}

/// What a restore pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Threads closed as stale (or paused).
    pub restored: Vec<String>,
    /// Process groups that survived their owner and were killed.
    pub killed_groups: Vec<i64>,
    /// Contract B registries refused whole, with the reason (nothing of them changed).
    pub rejected: Vec<String>,
}

struct Candidate {
    id: String,
    manager_id: ManagerId,
    contract: Contract,
    pid: Option<i64>,
    pgid: Option<i64>,
    process_started_at: Option<i64>,
    owner: Option<ProcessIdentity>,
    launch_seq: i64,
    session_file: Option<String>,
    created_at: String,
}

/// Restores every live thread whose owner is not alive and is not `me`.
pub fn restore_dead_owners(
    store: &Store,
    me: ProcessIdentity,
    texts: &RestoreTexts,
) -> Result<RestoreReport> {
    let candidates: Vec<Candidate> = {
        let conn = store.read()?;
        let mut stmt = conn.prepare_cached(include_str!("../../sql/restore_candidates.sql"))?;
        let rows = stmt.query_map([], |r| {
            let owner_pid: Option<i64> = r.get("owner_pid")?;
            let owner_started: Option<i64> = r.get("owner_started_at")?;
            Ok(Candidate {
                id: r.get("id")?,
                manager_id: r.get("manager_id")?,
                contract: r.get("contract")?,
                pid: r.get("pid")?,
                pgid: r.get("pgid")?,
                process_started_at: r.get("process_started_at")?,
                owner: owner_pid.map(|pid| ProcessIdentity {
                    pid,
                    started_at: owner_started.unwrap_or(-1),
                }),
                launch_seq: r.get("launch_seq")?,
                session_file: r.get("session_file")?,
                created_at: r.get("created_at")?,
            })
        })?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    let mut report = RestoreReport::default();
    let mut refused: Vec<ManagerId> = Vec::new();
    let mut singles: Vec<Candidate> = Vec::new();
    let mut agent_batches: std::collections::BTreeMap<ManagerId, Vec<Candidate>> =
        Default::default();
    for c in candidates {
        if !owner_gone(c.owner, me) {
            continue;
        }
        if c.contract != Contract::Agent {
            singles.push(c);
            continue;
        }
        if refused.contains(&c.manager_id) {
            continue;
        }
        if let Some(problem) = agents::registry_problem(&*store.read()?, c.manager_id)? {
            report.rejected.push(format!(
                "The saved subagent registry {} cannot be restored: {problem}. Nothing of it was changed. Repair: fix or delete the broken rows (threadbase sql \"SELECT path, parent_path, agent_state FROM threads WHERE manager_id = {}\"), then run threadbase restore again.",
                c.manager_id, c.manager_id
            ));
            refused.push(c.manager_id);
            continue;
        }
        agent_batches.entry(c.manager_id).or_default().push(c);
    }
    kill_processes_of(
        singles.iter().chain(agent_batches.values().flatten()),
        &mut report,
    );
    for c in singles {
        let unrecorded = session_messages(&c);
        if store.write(|tx| restore_in(tx, &c, &unrecorded, texts))? {
            report.restored.push(c.id);
        }
    }
    for (_, batch) in agent_batches {
        let unrecorded: Vec<Vec<Usage>> = batch.iter().map(session_messages).collect();
        // One registry, one transaction.
        let restored = store.write(|tx| {
            let mut done = Vec::new();
            for (c, messages) in batch.iter().zip(&unrecorded) {
                if restore_in(tx, c, messages, texts)? {
                    done.push(c.id.clone());
                }
            }
            Ok(done)
        })?;
        report.restored.extend(restored);
    }
    restore_unlaunched_agents(store, me, &refused, texts, &mut report)?;
    Ok(report)
}

/// True when the recorded owner is neither this process nor alive (or was never recorded).
fn owner_gone(owner: Option<ProcessIdentity>, me: ProcessIdentity) -> bool {
    !owner.is_some_and(|o| o == me || o.is_alive())
}

/// Kills what the threads being restored left running: a recorded group whose leader is still
/// the recorded process, else (one `/proc` pass for all of them) the processes that carry the
/// thread's id in their environment.
fn kill_processes_of<'a>(
    candidates: impl Iterator<Item = &'a Candidate>,
    report: &mut RestoreReport,
) {
    let mut gone: Vec<GoneThread<'_>> = Vec::new();
    for c in candidates {
        match (c.pid, c.pgid) {
            (Some(pid), Some(pgid)) if kill_recorded_group(pid, pgid, c.process_started_at) => {
                report.killed_groups.push(pgid);
            }
            // The recorded process is gone (a child exits on its own when its owner's pipes
            // close) or was never recorded (the owner died mid-launch).
            (_, pgid) => gone.push(GoneThread {
                thread_id: &c.id,
                pgid,
            }),
        }
    }
    for (t, killed) in gone.iter().zip(kill_thread_leftovers(&gone)) {
        if killed {
            report.killed_groups.extend(t.pgid);
        }
    }
}

/// Contract B runs reserved by a serve that died before launching them come back paused.
fn restore_unlaunched_agents(
    store: &Store,
    me: ProcessIdentity,
    refused: &[ManagerId],
    texts: &RestoreTexts,
    report: &mut RestoreReport,
) -> Result<()> {
    let rows: Vec<(String, ManagerId, Option<i64>, Option<i64>)> = {
        let conn = store.read()?;
        let mut stmt =
            conn.prepare_cached(include_str!("../../sql/agent_restore_candidates.sql"))?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for (id, manager_id, pid, started_at) in rows {
        let owner = pid.map(|pid| ProcessIdentity {
            pid,
            started_at: started_at.unwrap_or(-1),
        });
        if !owner_gone(owner, me) || refused.contains(&manager_id) {
            continue;
        }
        let changed = store.write(|tx| {
            Ok(tx
                .prepare_cached(include_str!("../../sql/agent_restore_unlaunched.sql"))?
                .execute(
                    named_params! {":paused_status": texts.paused_status, ":at": now_iso(), ":id": id},
                )?
                > 0)
        })?;
        if changed {
            report.restored.push(id);
        }
    }
    Ok(())
}

/// The completed assistant messages of a thread's session file since the thread was created,
/// read after its processes are gone (none when it has no readable file).
fn session_messages(c: &Candidate) -> Vec<Usage> {
    let since = crate::time::ms_from_iso(&c.created_at).unwrap_or(0);
    c.session_file
        .as_deref()
        .and_then(|f| crate::pi::session::SessionFile::read(f).ok())
        .map(|file| usage::session_messages(&file, since))
        .unwrap_or_default()
}

/// Closes one thread of a dead owner as stale (contract B: paused), adding the usage of the
/// messages of its session file its row has not counted; false if it changed meanwhile.
fn restore_in(
    tx: &rusqlite::Transaction<'_>,
    c: &Candidate,
    messages: &[Usage],
    texts: &RestoreTexts,
) -> Result<bool> {
    let at = now_iso();
    let n = tx
        .prepare_cached(include_str!("../../sql/restore_close_stale.sql"))?
        .execute(named_params! {
            ":message": texts.stale_message, ":at": at, ":paused_status": texts.paused_status,
            ":id": c.id, ":launch": c.launch_seq,
        })?;
    if n > 0 {
        let data =
            json!({"exit": {"kind": ExitKind::Stale, "message": texts.stale_message}}).to_string();
        events::append(
            tx,
            &c.id,
            &[NewEvent {
                at: &at,
                kind: "thread_closed",
                data: &data,
            }],
        )?;
        usage::reconcile(tx, &c.id, messages, &at)?;
    }
    Ok(n > 0)
}
