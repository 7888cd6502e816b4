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
//! Owners are judged from this host (issue 33): a row of another host counts as living, so the
//! pass never closes it nor signals the pids it names; a row of an earlier boot of this host is
//! restored, its recorded group left alone (only the environment proves a leftover). Another
//! host's rows are closed only on purpose, by `threadbase host forget` ([`restore_host`]).
//!
//! Whatever the host id says, no pass closes a row whose owning serve has a heartbeat that has
//! not lapsed (issue 46: its `host_serves` row, the view `host_lease`), unless this process can
//! see that serve is gone (its host, boot and PID space are this process's and its pid names
//! no living process): a cloned machine or a container sharing the host id is not this host,
//! whatever its rows say.
//!
//! Usage the dead owner never recorded (messages its child completed after the last committed
//! batch, or after the owner died) is read back from the thread's Pi session file once the
//! processes are gone, in the transaction that closes the thread (`store::usage::reconcile`).

use crate::domain::{Contract, ExitKind, ManagerId, ThreadId};
use serde_json::json;

use super::signals::{kill_recorded_group, kill_thread_leftovers, GoneThread, ProcessIdentity};
use crate::error::Result;
use crate::store::events::{self, NewEvent};
use crate::store::usage::{self, Usage};
use crate::store::Store;
use crate::store::{agents, notices, restore};
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
    pub restored: Vec<ThreadId>,
    /// Process groups that survived their owner and were killed.
    pub killed_groups: Vec<i64>,
    /// Contract B registries refused whole, with the reason (nothing of them changed).
    pub rejected: Vec<String>,
}

/// A live thread with its owner as a process identity.
struct Candidate {
    row: restore::Candidate,
    owner: Option<crate::identity::Owner>,
}

impl std::ops::Deref for Candidate {
    type Target = restore::Candidate;
    fn deref(&self) -> &restore::Candidate {
        &self.row
    }
}

/// Restores every live thread whose owner is not alive and is not `me` (both seen from this
/// host: a thread of another host is never one).
pub fn restore_dead_owners(
    store: &Store,
    me: ProcessIdentity,
    texts: &RestoreTexts,
) -> Result<RestoreReport> {
    restore_rows(store, texts, &|row| owner_gone(row.owner, me))
}

/// Restores every live thread held on host `host_id`, another host whose lease ran out
/// (`threadbase host forget`): closed as stale (contract B: paused), nothing signalled (its
/// processes, if any still run, are that host's).
pub fn restore_host(store: &Store, host_id: &str, texts: &RestoreTexts) -> Result<RestoreReport> {
    let other = crate::host::HostIdentity::here().host_id != host_id;
    restore_rows(store, texts, &|row| other && row.host == Some(host_id))
}

/// A row's owner as the restore pass judges it: the identity, and the host it recorded.
struct RowOwner<'a> {
    owner: Option<crate::identity::Owner>,
    host: Option<&'a str>,
}

/// Whether a serve whose heartbeat has not lapsed owns the row (pid, start, host, boot), and
/// nothing here can see it gone: then the row is that serve's, whatever `gone` says.
fn held_by_a_live_serve(
    serves: &[crate::store::hosts::LiveServe],
    pid: Option<i64>,
    started_at: Option<i64>,
    host: Option<&str>,
    boot: Option<&str>,
) -> bool {
    let (Some(pid), Some(started_at)) = (pid, started_at) else {
        return false;
    };
    serves
        .iter()
        .any(|s| s.owns(pid, started_at, host, boot) && !s.gone_here())
}

/// The pass: every live thread (and reserved, never launched contract B run) whose owner
/// `gone` says is gone.
fn restore_rows(
    store: &Store,
    texts: &RestoreTexts,
    gone: &dyn Fn(&RowOwner<'_>) -> bool,
) -> Result<RestoreReport> {
    let serves = crate::store::hosts::live_serves(&store.read()?)?;
    let candidates: Vec<Candidate> = restore::candidates(&store.read()?)?
        .into_iter()
        .map(|row| Candidate {
            owner: crate::identity::Owner::recorded(
                row.owner_pid,
                row.owner_started_at,
                row.owner_host.as_deref(),
                row.owner_boot.as_deref(),
            ),
            row,
        })
        .collect();
    let mut report = RestoreReport::default();
    let mut refused: Vec<ManagerId> = Vec::new();
    let mut singles: Vec<Candidate> = Vec::new();
    let mut agent_batches: std::collections::BTreeMap<ManagerId, Vec<Candidate>> =
        Default::default();
    for c in candidates {
        if !gone(&RowOwner {
            owner: c.owner,
            host: c.owner_host.as_deref(),
        }) || held_by_a_live_serve(
            &serves,
            c.owner_pid,
            c.owner_started_at,
            c.owner_host.as_deref(),
            c.owner_boot.as_deref(),
        ) {
            continue;
        }
        if c.contract != Contract::Agent {
            singles.push(c);
            continue;
        }
        if refused.contains(&c.manager_id) {
            continue;
        }
        if let Some(problem) = agents::registry_problem(&store.read()?, c.manager_id)? {
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
            report.restored.push(c.row.id);
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
    restore_unlaunched_agents(store, gone, &serves, &refused, texts, &mut report)?;
    Ok(report)
}

/// True when the recorded owner is neither this process nor alive (or was never recorded).
fn owner_gone(owner: Option<crate::identity::Owner>, me: ProcessIdentity) -> bool {
    crate::identity::holder(owner, me) == crate::identity::Holder::Gone
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
        // Another host's processes are that host's to signal.
        if c.owner.is_some_and(|o| o.other_host.is_some()) {
            continue;
        }
        // A recorded pid of an earlier boot names nothing now: only the environment can prove
        // a process is the thread's.
        let recorded = c.owner.is_none_or(|o| o.here().is_some());
        match (c.pid, c.pgid) {
            (Some(pid), Some(pgid))
                if recorded && kill_recorded_group(pid, pgid, c.process_started_at) =>
            {
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
    gone: &dyn Fn(&RowOwner<'_>) -> bool,
    serves: &[crate::store::hosts::LiveServe],
    refused: &[ManagerId],
    texts: &RestoreTexts,
    report: &mut RestoreReport,
) -> Result<()> {
    for run in restore::unlaunched_agents(&store.read()?)? {
        let owner = crate::identity::Owner::recorded(
            run.owner_pid,
            run.owner_started_at,
            run.owner_host.as_deref(),
            run.owner_boot.as_deref(),
        );
        let owner = RowOwner {
            owner,
            host: run.owner_host.as_deref(),
        };
        let held = held_by_a_live_serve(
            serves,
            run.owner_pid,
            run.owner_started_at,
            run.owner_host.as_deref(),
            run.owner_boot.as_deref(),
        );
        if !gone(&owner) || held || refused.contains(&run.manager_id) {
            continue;
        }
        let changed = store
            .write(|tx| restore::pause_unlaunched(tx, &run.id, texts.paused_status, &now_iso()))?;
        if changed {
            report.restored.push(run.id);
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
    tx: &crate::store::Tx<'_>,
    c: &Candidate,
    messages: &[Usage],
    texts: &RestoreTexts,
) -> Result<bool> {
    let at = now_iso();
    let closed = restore::close_stale(
        tx,
        &c.id,
        c.launch_seq,
        texts.stale_message,
        texts.paused_status,
        &at,
    )?;
    if closed {
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
        // A question the dead serve left pending is cancelled with its thread.
        crate::store::questions::cancel_thread(tx, &c.id, "restore", &at)?;
        // Contract A's parent session is told when it is back (its next serve delivers it).
        notices::write(tx, &c.id, notices::Cause::Closed, &at)?;
    }
    Ok(closed)
}
