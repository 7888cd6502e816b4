//! `agent_steer`: a steering message for a thread, as a `mailbox` row. Into a working run it
//! goes through Pi's steering queue; a settled thread is resumed with it as the prompt of a
//! new run on the same session, by this serve or by the one still holding its process.

use crate::domain::ManagerId;
use crate::engine::Reply;
use std::time::{Duration, Instant};

use super::{answer_row, Agents, Engine, WAIT_POLL};
use crate::contract::agent as contract;
use crate::error::{Error, ErrorCode, Result};
use crate::paths;
use crate::store::agents::mailbox;
use crate::store::agents::{self, AgentRow};
use crate::time::now_iso;

/// How long a steer waits for another serve to pick up its row before answering.
const STEER_HANDOFF_WAIT: Duration = Duration::from_secs(3);
/// How long a resume waits for another serve to retire the thread's previous process (a
/// graceful stop of an idle Pi takes about 2 s).
const RETIREMENT_WAIT: Duration = Duration::from_secs(10);

impl Agents<'_> {
    /// A settled thread whose process another serve still holds, with no working
    /// descendants, is being retired by that serve: a resume waits (bounded) for the process
    /// to end, so that it runs here and two Pi processes never share one session file. A
    /// process that hosts working descendants stays, and its holder runs the resume.
    async fn after_retirement(&self, registry: ManagerId, mut row: AgentRow) -> Result<AgentRow> {
        let deadline = Instant::now() + RETIREMENT_WAIT;
        while !row.active() && self.holder_elsewhere(&row).is_some() && Instant::now() < deadline {
            if self.working_descendants(registry, &row.path)? > 0 {
                break;
            }
            tokio::time::sleep(WAIT_POLL).await;
            row = self.restored_if_orphaned(self.row_by_id(&row.id)?)?;
        }
        Ok(row)
    }
}

pub(in crate::engine) async fn steer(e: &Engine, req: contract::Steer) -> Result<Reply> {
    let e = &Agents(e);
    let registry = e.registry()?;
    let contract::Steer {
        path,
        message,
        timeout_ms,
    } = req;
    let path = path.as_str();
    if !e.caller_is_root() {
        let me = e.own_row(registry)?;
        if me.stop_requested {
            return Err(Error::forbidden(format!(
                "Stopping agents may not steer descendants. Repair: {} is stopping; wait until it is resumed.",
                me.path
            )));
        }
    }
    let path = paths::resolve_agent_path(path, e.caller())?;
    e.check_access(&path, false)?;
    let Some(message) = message else {
        // A timeout alone re-arms the working thread's timer from now.
        let ms = timeout_ms.unwrap_or(contract::REPORT_TIMEOUT_MS.0);
        let row = e.restored_if_orphaned(e.known(registry, &path)?)?;
        if !row.active() || row.stop_requested || !e.arm_timer(&row.id, ms)? {
            return Err(Error::conflict(format!(
                "{}. Repair: {path} is {}; steer it with a message to resume it (with timeoutMs to arm a timer for that run).",
                contract::NO_TIMEOUT_TO_EXTEND,
                if row.stop_requested { "stopping" } else { row.state.as_str() }
            )));
        }
        return answer_row(e.row_by_id(&row.id)?);
    };
    if message.trim().is_empty() {
        return Err(Error::invalid(
            "Steering message must not be empty. Repair: say what the thread should do next.",
        ));
    }
    // So that this steer resumes it here.
    let target = e.restored_if_orphaned(e.known(registry, &path)?)?;
    let target = e.after_retirement(registry, target).await?;
    // One transaction: the checks, the resume reservation (if settled) and the row.
    let reserved = e.store.write(|tx| {
        let row = agents::thread_at_path(tx, registry, &path)?.ok_or_else(|| {
            Error::new(ErrorCode::UnknownReference, format!("Unknown thread {path}. Repair: run agent_status to list the threads you can address."))
        })?;
        if row.reaped_at.is_some() {
            // Reaped while this steer waited: it cannot be resumed.
            return Err(super::reaped_error(&path));
        }
        if row.stop_requested && row.active() {
            return Err(Error::conflict(format!(
                "Thread is stopping; wait for stopped state before resuming. Repair: agent_wait {path}, then steer it again."
            )));
        }
        e.check_agent_budget(tx, Some(&row.id), "agent_steer")?;
        let mut reserved = None;
        if !row.active() {
            e.check_no_stopped_ancestor(tx, registry, row.parent_path.as_deref().unwrap_or(""))?;
            e.check_capacity(tx, registry)?;
            // A process another serve still holds (it hosts working descendants) runs
            // the resume there; otherwise this serve runs it.
            let runner = e
                .holder_elsewhere(&row)
                .map_or_else(|| e.rt.owner(), |o| agents::ProcessIdentity::here(o.pid, o.started_at));
            agents::reserve_resume(
                tx,
                &agents::Lifecycle {
                    id: &row.id,
                    status: contract::STATUS_STARTING,
                    owner: runner,
                    at: &now_iso(),
                },
            )?;
            // A resumed run is detached: the steer answers at once.
            crate::store::agents::recap::set_detached(tx, &row.id, true)?;
            reserved = Some(runner == e.rt.owner());
        }
        mailbox::insert(
            tx,
            &mailbox::NewMail {
                thread_id: &row.id,
                direction: mailbox::Direction::ToChild,
                kind: mailbox::MailKind::Steer,
                send_key: &format!("steer:{}", crate::ids::random_hex(16)),
                message_id: None,
                body: &message,
                recipient: None,
                at: &now_iso(),
                delivered: false,
            },
        )?;
        Ok(reserved)
    })?;
    let row = e.row_by_id(&target.id)?;
    // A steer that starts a new run answers with the thread as that run starts (the
    // original's view right after it is started); a steer into a working run, with the
    // view after delivery.
    let starting = reserved.is_some().then(|| row.clone());
    if reserved == Some(true)
        || (row.live && e.is_mine(&row))
        || (!row.live && !e.owner_alive(&row))
    {
        // This serve runs it: a resumed run here, or a steer into a process it holds.
        e.deliver_steering(&row.id).await?;
    } else {
        // Another serve holds the process: its watcher delivers the row.
        let deadline = Instant::now() + STEER_HANDOFF_WAIT;
        while Instant::now() < deadline {
            if e.pending_steers(&row.id)?
                .iter()
                .all(|s| s.sent_to.is_some())
            {
                break;
            }
            tokio::time::sleep(WAIT_POLL).await;
        }
    }
    // The timer is re-armed only if the thread is working afterwards.
    if let Some(ms) = timeout_ms {
        e.arm_timer(&target.id, ms)?;
    }
    match starting {
        Some(row) => answer_row(row),
        None => answer_row(e.row_by_id(&target.id)?),
    }
}
