//! Processes talk through rows (DESIGN principle 7). Another process that needs something done
//! by this `serve` writes a row: a notice for this session's caller (`mailbox`, direction
//! `to_parent`), a control request for a child whose pipes this process holds (`commands`: a
//! stop from `top` or `threadbase stop`; a contract A send, stop or resume from the serve of
//! an ancestor session, a resume for a closed thread of this serve's manager), or contract B's
//! notices and steering (handed to [`crate::engine::agent::AgentHost`]). A command is claimed (`running`) before it
//! is carried out, on a task of its own so a long send never holds up the watcher; the sends
//! and resumes of one thread run one after another, in the order they were written.
//! The watcher notices new commits by the database's change counter (`PRAGMA data_version` on a
//! connection of its own, which changes only when another connection commits) and carries the
//! rows out within [`POLL`], claiming each one in a transaction so it happens once.

use crate::domain::ThreadId;
use crate::runtime::StopBy;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use serde_json::json;
use tokio::sync::mpsc;

use crate::engine::Engine;
use crate::error::Result;
use crate::serve::output::Output;
use crate::store::commands::{self, CommandKind, CommandState, PendingCommand};
use crate::store::{mailbox, Store};

/// How often the change counter is read.
pub const POLL: Duration = Duration::from_millis(50);

/// Watches the database for rows addressed to `engine`'s session (notices, emitted on
/// `out`), to the children its runtime owns and the threads its manager holds (commands) and
/// to its contract B side, until `out` closes.
pub async fn run(engine: Arc<Engine>, out: Output) {
    let db = engine.config().db.clone();
    let store = engine.store().clone();
    let agent = engine.agent_host().clone();
    let session_id = engine.config().session_id.clone();
    let Ok(conn) = Connection::open_with_flags(
        &db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    ) else {
        tracing::error!(
            "the row watcher could not open {}; cross-process notices are off",
            db.display()
        );
        return;
    };
    let _ = conn.busy_timeout(crate::store::BUSY_TIMEOUT);
    let queues = Queues::default();
    let mut seen: Option<i64> = None;
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            // Notices held back by a request were released: deliver what is still due now,
            // even if nothing else committed.
            _ = agent.notices_released() => seen = None,
            // A wait let go of a thread's notices: the ones it did not report are due now.
            _ = engine.notice_holds().released() => seen = None,
        }
        if out.is_closed() {
            return;
        }
        // Contract B's report-only timers: a memory read unless a deadline has passed.
        if let Err(e) = agent.fire_due_timers() {
            tracing::warn!("firing agent timers failed: {e}");
        }
        let version: i64 = match conn.query_row("PRAGMA data_version", [], |r| r.get(0)) {
            Ok(v) => v,
            Err(_) => continue,
        };
        if seen == Some(version) {
            continue;
        }
        seen = Some(version);
        if let Err(e) = deliver_notices(&conn, &store, &engine, &session_id, &out) {
            tracing::warn!("delivering notices failed: {e}");
        }
        match pending_commands(&conn, &engine) {
            Ok(pending) => {
                if let Err(e) = dispatch(&engine, &queues, pending) {
                    tracing::warn!("claiming commands failed: {e}");
                }
            }
            Err(e) => tracing::warn!("reading commands failed: {e}"),
        }
        match agent.rows_changed(&conn, &out) {
            Ok((steer_ids, settled)) => agent.sweep(steer_ids, settled).await,
            Err(e) => tracing::warn!("reading agent rows failed: {e}"),
        }
    }
}

/// Emits the notices due to this session's caller, each once. Contract A's (kind `notice`)
/// wait while a `wait` holds their thread, and with `THREADBASE_NOTICES=off` are marked
/// delivered without going out.
fn deliver_notices(
    conn: &Connection,
    store: &Store,
    engine: &Engine,
    session_id: &str,
    out: &Output,
) -> Result<()> {
    let notices_on = engine.config().settings.notices;
    for n in mailbox::pending_notices(conn, session_id)? {
        let thread_notice = n.kind == mailbox::MailKind::Notice;
        if thread_notice && engine.notice_holds().is_held(&n.thread_id) {
            continue;
        }
        if store.write(|tx| mailbox::claim_notice(tx, n.id))? {
            if thread_notice && !notices_on {
                continue;
            }
            let _ = out.send(json!({"method": "notice", "params": {
                "threadId": n.thread_id, "path": n.path, "kind": n.kind,
                "messageId": n.message_id, "text": n.body, "createdAt": n.created_at,
            }}));
        }
    }
    Ok(())
}

fn pending_commands(conn: &Connection, engine: &Engine) -> Result<Vec<PendingCommand>> {
    let me = engine.runtime().owner();
    commands::pending(conn, (me.pid, me.started_at), engine.manager_id())
}

/// Claims each command and starts carrying it out: stops and interrupts at once, sends and
/// resumes through their thread's queue.
fn dispatch(engine: &Arc<Engine>, queues: &Queues, pending: Vec<PendingCommand>) -> Result<()> {
    for c in pending {
        if !engine.store().write(|tx| commands::claim(tx, c.id))? {
            continue;
        }
        match c.kind {
            CommandKind::Send | CommandKind::Resume => queues.push(engine, c),
            CommandKind::Stop | CommandKind::ForceStop | CommandKind::Interrupt => {
                let engine = engine.clone();
                tokio::spawn(tracing::Instrument::in_current_span(async move {
                    carry(&engine, c).await
                }));
            }
        }
    }
    Ok(())
}

/// One queue (and task) per thread that was sent to or resumed from another serve, so its
/// commands run in the order they were written. Dropped with the watcher, which ends them.
#[derive(Default)]
struct Queues(Mutex<HashMap<ThreadId, mpsc::UnboundedSender<PendingCommand>>>);

impl Queues {
    fn push(&self, engine: &Arc<Engine>, c: PendingCommand) {
        let mut queues = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let c = match queues.get(&c.thread_id) {
            Some(tx) => match tx.send(c) {
                Ok(()) => return,
                Err(mpsc::error::SendError(c)) => c,
            },
            None => c,
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<PendingCommand>();
        let thread_id = c.thread_id.clone();
        let _ = tx.send(c);
        queues.insert(thread_id, tx);
        let engine = engine.clone();
        tokio::spawn(tracing::Instrument::in_current_span(async move {
            while let Some(c) = rx.recv().await {
                carry(&engine, c).await;
            }
        }));
    }
}

/// Carries out one claimed command and records its outcome: stops and interrupts as plain
/// text (`top` and `threadbase stop` read it), sends and resumes as the JSON their requester
/// reads (an error as `{code, message}`).
async fn carry(engine: &Engine, c: PendingCommand) {
    let runtime = engine.runtime();
    let outcome = match c.kind {
        CommandKind::Stop | CommandKind::ForceStop => runtime
            .stop(
                &c.thread_id,
                c.kind == CommandKind::ForceStop,
                StopBy::Other,
            )
            .await
            .map(|live| {
                if live {
                    crate::engine::STOPPED.to_string()
                } else {
                    crate::engine::STOP_ALREADY_CLOSED.to_string()
                }
            }),
        CommandKind::Interrupt => runtime
            .abort(&c.thread_id, Duration::from_millis(1_500))
            .await
            .map(|_| crate::engine::INTERRUPTED.to_string()),
        CommandKind::Send | CommandKind::Resume => {
            engine
                .carry_out(c.kind, &c.thread_id, c.payload.as_deref())
                .await
        }
    };
    let structured = matches!(c.kind, CommandKind::Send | CommandKind::Resume);
    let (state, result) = match outcome {
        Ok(r) => (CommandState::Done, r),
        Err(e) if structured => (
            CommandState::Failed,
            serde_json::to_string(&e).unwrap_or_else(|_| e.message.clone()),
        ),
        Err(e) => (CommandState::Failed, e.message),
    };
    let recorded = engine
        .store()
        .write(|tx| commands::finish(tx, c.id, state, &result));
    if let Err(e) = recorded {
        tracing::warn!(command = c.id, "recording a command's outcome failed: {e}");
    }
}
