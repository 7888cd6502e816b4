//! Contract A across serves. Every child Pi runs its own serve, so the threads below a
//! session's own children are held by other processes. Their rows can be read from here
//! (poll, wait and list project them), but only the serve that holds a thread's pipes can send
//! to it or stop it, and a closed thread is resumed by the serve of the manager it belongs to.
//! Such work is a `commands` row (DESIGN principle 7): written here, claimed and carried out by
//! that serve's row watcher, which records the outcome in the same row; this side waits for
//! the outcome, and withdraws a row nobody claimed in time (a claimed row is the owner's to
//! finish). A thread whose serve is gone is given to the restore pass first.

use crate::domain::{CommandKind, CommandState, ManagerId, ThreadId, ThreadStatus};
use std::time::{Duration, Instant};

use super::Engine;
use crate::engine::restore_dead_owners;
use crate::error::{Error, ErrorCode, Result};
use crate::identity::{self, Holder, Owner};
use crate::store::{commands, hosts, threads};

/// How often a requester reads its command row.
const POLL: Duration = Duration::from_millis(25);
/// How long a command may wait for its owner to claim it (the owner's watcher reads the
/// database every 50 ms; a serve busy with a long write may take longer).
pub const PICKUP_WAIT: Duration = Duration::from_secs(5);

/// Who holds `id`'s live process, seen from this serve (`None`: it is closed, or closing here:
/// ours, but no longer in the runtime, its close being recorded). A live row whose serve is
/// gone is [`Holder::Gone`]. The lease of another host is judged by [`request`].
pub(super) fn holder(e: &Engine, id: &ThreadId) -> Result<Option<Holder>> {
    if e.rt.is_live(id) {
        return Ok(Some(Holder::Here));
    }
    let Some((status, held)) = threads::thread_holder(&e.store.read()?, id)? else {
        return Ok(None);
    };
    if status != ThreadStatus::Live {
        return Ok(None);
    }
    Ok(match identity::holder(held, e.rt.owner()) {
        Holder::Here => None,
        h => Some(h),
    })
}

/// The restore pass for every thread whose serve is gone (the same pass `serve` runs at
/// start): an orphaned thread becomes closed with a `stale` exit.
pub(super) fn restore_orphans(e: &Engine) -> Result<()> {
    let report = restore_dead_owners(&e.store, e.rt.owner())?;
    if !report.restored.is_empty() {
        tracing::info!(threads = ?report.restored, "restored threads of serves that are gone");
    }
    Ok(())
}

/// The living serve (not this one) that owns a manager, if there is one.
pub(super) fn manager_owner(e: &Engine, manager_id: ManagerId) -> Result<Option<Owner>> {
    let owner = threads::manager_owner(&e.store.read()?, manager_id)?.flatten();
    Ok(identity::holder(owner, e.rt.owner()).elsewhere())
}

/// How long the owner may take once it claimed a command of `kind`: what the same action
/// takes at most in the owner (a launch still under way, the prompt gate and the send's
/// answer; a graceful stop or an abort; a launch), with room for its writes.
fn owner_budget(kind: CommandKind) -> Duration {
    use crate::runtime::{
        LAUNCH_WAIT, PROMPT_ANSWER_WAIT, PROMPT_GATE_WAIT, SEND_TIMEOUT, STOP_ABORT_TIMEOUT,
        STOP_KILL_WAIT, STOP_TERM_WAIT,
    };
    let slack = Duration::from_secs(5);
    match kind {
        CommandKind::Send => LAUNCH_WAIT + PROMPT_GATE_WAIT + SEND_TIMEOUT + slack,
        CommandKind::Stop | CommandKind::ForceStop => {
            LAUNCH_WAIT + STOP_ABORT_TIMEOUT + STOP_TERM_WAIT + STOP_KILL_WAIT + slack
        }
        CommandKind::Interrupt => LAUNCH_WAIT + STOP_ABORT_TIMEOUT + slack,
        CommandKind::Resume => LAUNCH_WAIT + PROMPT_ANSWER_WAIT + slack,
        // git's own merge of a worktree: a few seconds at most on a local disk.
        CommandKind::Merge => Duration::from_secs(60) + slack,
    }
}

/// How a command ended, seen by the serve that wrote it.
#[derive(Debug)]
pub(super) enum Outcome {
    /// Carried out; the owner's `result` text.
    Done(String),
    /// The owner carried it out and it failed (its error, code and `Repair:` included).
    Failed(Error),
    /// Withdrawn before anyone claimed it, for this reason (nothing was done).
    Withdrawn(Withdrawn),
    /// Claimed, but not finished when the wait ended (it may still take effect).
    StillRunning,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Withdrawn {
    /// The owning serve is gone.
    OwnerGone,
    /// The thread closed before its owner took the command (a send or stop needs it live).
    ThreadClosed,
    /// Nobody claimed it within [`PICKUP_WAIT`].
    NotPickedUp,
}

/// Writes a command for the serve `owner` and waits for its outcome.
pub(super) async fn request(
    e: &Engine,
    thread_id: &ThreadId,
    kind: CommandKind,
    payload: Option<&str>,
    owner: Owner,
) -> Result<Outcome> {
    // A serve of another host takes its commands from the table, but only while its host's
    // lease holds: a host that went away is said at once, and nothing is written.
    if owner.other_host.is_some() {
        if let Some(lease) = hosts::lease_of_thread(&e.store.read()?, thread_id)? {
            if !lease.up {
                let action = match kind {
                    CommandKind::Send => "send",
                    CommandKind::Stop | CommandKind::ForceStop => "stop",
                    CommandKind::Interrupt => "interrupt",
                    CommandKind::Resume => "resume",
                    CommandKind::Merge => "merge",
                };
                return Err(hosts::unreachable(thread_id.as_str(), action, &lease));
            }
        }
    }
    let id = e
        .store
        .write(|tx| commands::insert(tx, thread_id, kind, payload))?;
    let written = Instant::now();
    let deadline = written + owner_budget(kind);
    loop {
        tokio::time::sleep(POLL).await;
        let commands::CommandStatus { state, result } = commands::state(&e.store.read()?, id)?;
        match state {
            CommandState::Done => return Ok(Outcome::Done(result.unwrap_or_default())),
            CommandState::Failed => return Ok(Outcome::Failed(owner_error(result.as_deref()))),
            CommandState::Pending => {
                let why = if !owner.is_alive() {
                    Some(Withdrawn::OwnerGone)
                } else if kind != CommandKind::Resume && holder(e, thread_id)?.is_none() {
                    Some(Withdrawn::ThreadClosed)
                } else if written.elapsed() > PICKUP_WAIT {
                    Some(Withdrawn::NotPickedUp)
                } else {
                    None
                };
                if let Some(why) = why {
                    if withdraw(e, id, why)? {
                        return Ok(Outcome::Withdrawn(why));
                    }
                    // Claimed meanwhile: the owner's to finish.
                }
            }
            CommandState::Running => {
                if !owner.is_alive() {
                    abandon(e, id)?;
                    return Ok(Outcome::Withdrawn(Withdrawn::OwnerGone));
                }
                if Instant::now() >= deadline {
                    return Ok(Outcome::StillRunning);
                }
            }
        }
    }
}

fn withdraw(e: &Engine, id: i64, why: Withdrawn) -> Result<bool> {
    let text = match why {
        Withdrawn::OwnerGone => "withdrawn: the owning serve is gone",
        Withdrawn::ThreadClosed => "withdrawn: the thread closed first",
        Withdrawn::NotPickedUp => "withdrawn: not picked up in time",
    };
    e.store.write(|tx| commands::withdraw(tx, id, text))
}

/// A claimed command whose owner died: nobody will finish it.
fn abandon(e: &Engine, id: i64) -> Result<()> {
    e.store
        .write(|tx| commands::abandon(tx, id, "the owning serve ended before it finished"))
}

/// The owner's error from a failed command's `result`: `{code, message}` as the owner wrote
/// it, else (a stop carried out by the runtime) its plain message.
fn owner_error(result: Option<&str>) -> Error {
    let text = result.unwrap_or("");
    serde_json::from_str::<Error>(text).unwrap_or_else(|_| {
        Error::new(
            ErrorCode::Conflict,
            format!(
                "The serve that holds the thread could not carry out the request: {text}. Repair: poll the thread to see its state, then try again."
            ),
        )
    })
}

/// The error for a command that did not get carried out.
pub(super) fn not_carried_out(path: &str, action: &str, why: Withdrawn) -> Error {
    match why {
        Withdrawn::OwnerGone => Error::new(
            ErrorCode::Closed,
            format!(
                "Thread is closed: {path} (the serve that held it ended before it took the {action}; nothing was done). Repair: poll it to see its exit, then resume it or start a new thread."
            ),
        ),
        Withdrawn::ThreadClosed => Error::new(
            ErrorCode::Closed,
            format!(
                "Thread is closed: {path} (it closed before the serve that held it took the {action}; nothing was done). Repair: poll it to see its exit, then resume it if it should go on."
            ),
        ),
        Withdrawn::NotPickedUp => Error::conflict(format!(
            "The serve that holds {path} did not take the {action} within {} s, so it was withdrawn and nothing was done. Repair: poll the thread and try again; if this repeats, that serve is stuck (`threadbase check`, `threadbase list` show its threads).",
            PICKUP_WAIT.as_secs()
        )),
    }
}

/// The error for a command still being carried out when the wait ended.
pub(super) fn still_running(path: &str, action: &str) -> Error {
    Error::conflict(format!(
        "The serve that holds {path} took the {action} but has not finished it yet; it may still take effect. Repair: poll or wait on the thread before trying again."
    ))
}
