//! Processes talk through rows (DESIGN principle 7). Another process that needs something done
//! by this `serve` writes a row: a notice for this session's caller (`mailbox`, direction
//! `to_parent`), a control request for a child whose pipes this process holds (`commands`: a
//! stop from `top` or `threadbase stop`; a contract A send, stop or resume from the serve of
//! an ancestor session, a resume for a closed thread of this serve's manager), or contract B's
//! notices and steering (handed to the engine's contract B side). A command is claimed (`running`) before it
//! is carried out, on a task of its own so a long send never holds up the watcher; the sends
//! and resumes of one thread run one after another, in the order they were written.
//! It also checks, every [`OWNER_CHECK`], whether the serves that hold live threads are still
//! alive, and runs the restore pass for the threads of those that are not: reads never do.
//! The watcher notices new commits by the database's change counter (`PRAGMA data_version` on a
//! connection of its own, which changes only when another connection commits) and carries the
//! rows out within [`POLL`], claiming each one in a transaction so it happens once.

use crate::domain::{SessionId, ThreadId};
use crate::runtime::StopBy;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;

use crate::engine::Engine;
use crate::error::Result;
use crate::serve::output::Output;
use crate::serve::supervision::{self, Part, Supervision};
use crate::store::commands::{self, CommandKind, CommandState, PendingCommand};
use crate::store::{mailbox, Conn, Store};
use crate::time::Backoff;

/// How often the change counter is read.
pub const POLL: Duration = Duration::from_millis(50);

/// How often the owners of the live threads are checked: a thread whose serve died is closed
/// as stale (contract B: paused) by the restore pass within about this long, by whichever
/// serve's watcher sees it first. A dead serve commits nothing, so this is a timer, not the
/// change counter. Reads (`poll`, `wait`, `list`, the CLI) never restore: they report the rows.
pub const OWNER_CHECK: Duration = Duration::from_secs(1);

/// Watches the database for rows addressed to `engine`'s session (notices, emitted on
/// `out`), to the children its runtime owns and the threads its manager holds (commands) and
/// to its contract B side, until `out` closes. While its connection (the change feed) or the
/// heartbeat cannot be had it retries them with a backoff and records what is not running in
/// `supervision` (issue 46); the restore pass, the stall and cap checks and the timers go on
/// through the store's own connections meanwhile.
pub async fn run(engine: Arc<Engine>, out: Output, supervision: Arc<Supervision>) {
    let store = engine.store().clone();
    let session_id = engine.config().session_id.clone();
    let mut feed = Feed::new(supervision.clone());
    feed.open(&store).await;
    let queues = Queues::default();
    let mut status = StatusLine::default();
    let mut caps = CapWatch::default();
    let mut seen: Option<i64> = None;
    let mut seen_rows: Option<i64> = None;
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // `serve` ran the restore pass as it started: the first check is one period later.
    let mut owners =
        tokio::time::interval_at(tokio::time::Instant::now() + OWNER_CHECK, OWNER_CHECK);
    owners.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The host's lease (`store::hosts`): the first heartbeat at once, off the start's path;
    // then every HEARTBEAT, sooner after a failure (a backoff up to HEARTBEAT) and at once
    // when the watcher's connection was lost or regained, so the row says so.
    let mut next_beat = tokio::time::Instant::now();
    let mut beat_retry = supervision::retry(crate::store::hosts::HEARTBEAT);
    let mut beats = crate::store::hosts::Heartbeats::default();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = owners.tick() => {
                restore_dead_owners(&engine).await;
                check_stalls(&engine).await;
                caps.run(&engine, true).await;
                // A stall is a matter of time: the status is read again each second.
                if let Some(watch) = &feed.watch {
                    status.report(&engine, watch.conn(), &out, true);
                }
                continue;
            }
            _ = tokio::time::sleep_until(next_beat) => {
                let wait = if beat(&engine, &mut beats, &supervision).await {
                    beat_retry.reset();
                    crate::store::hosts::HEARTBEAT
                } else {
                    beat_retry.failed()
                };
                next_beat = tokio::time::Instant::now() + wait;
                continue;
            }
            // A request let go of a thread's notices: the ones it did not report are due now,
            // even if nothing else committed.
            _ = engine.notice_holds().released() => {
                seen = None;
                seen_rows = None;
            }
        }
        if out.is_closed() {
            return;
        }
        // Contract B's report-only timers: a memory read unless a deadline has passed.
        if let Err(e) = engine.agents().fire_due_timers() {
            tracing::warn!("firing agent timers failed: {e}");
        }
        // The change feed: while it has no connection, tried again when its backoff says.
        if feed.watch.is_none() {
            if !feed.due() {
                continue;
            }
            if !feed.open(&store).await {
                continue;
            }
            // Held again: everything that waited is read now, and the row says so at once.
            seen = None;
            seen_rows = None;
            next_beat = tokio::time::Instant::now();
        }
        let Some(watch) = feed.watch.as_mut() else {
            continue;
        };
        let version: i64 = match watch.version() {
            Ok(v) => v,
            Err(e) => {
                feed.lost(&e.message);
                next_beat = tokio::time::Instant::now();
                continue;
            }
        };
        if seen == Some(version) {
            status.report(&engine, feed.conn(), &out, false);
            caps.run(&engine, false).await;
            continue;
        }
        seen = Some(version);
        status.changed();
        caps.dirty = true;
        // On PostgreSQL, announcements of children's facts alone (events, output, usage)
        // change no command, notice or thread state: the status line and the caps look at
        // them, the scans below do not (a streaming team sends hundreds a second).
        let rows = watch.rows_version().ok().flatten();
        if rows.is_some() && rows == seen_rows {
            status.report(&engine, feed.conn(), &out, false);
            caps.run(&engine, false).await;
            continue;
        }
        seen_rows = rows;
        // THREADBASE_QUEUE=1: a freed slot launches the oldest queued thread.
        engine.queue_changed();
        if let Err(e) = deliver_notices(feed.conn(), &store, &engine, &session_id, &out) {
            tracing::warn!("delivering notices failed: {e}");
        }
        match pending_commands(feed.conn(), &engine) {
            Ok(pending) => {
                if let Err(e) = dispatch(&engine, &queues, pending) {
                    tracing::warn!("claiming commands failed: {e}");
                }
            }
            Err(e) => tracing::warn!("reading commands failed: {e}"),
        }
        match engine.agents().rows_changed(feed.conn(), &|line| {
            let _ = out.send_line(line);
        }) {
            Ok((steer_ids, settled)) => engine.agents().sweep(steer_ids, settled).await,
            Err(e) => tracing::warn!("reading agent rows failed: {e}"),
        }
        status.report(&engine, feed.conn(), &out, false);
        caps.run(&engine, false).await;
    }
}

/// Issue 49: the caps on this serve's running children ([`Engine::check_caps`]), judged
/// after a commit (the ingest writer's usage rows, another serve's, a `budget set`) at most
/// every [`CapWatch::EVERY`] (a commit in between is judged at the next poll), and each second.
#[derive(Default)]
struct CapWatch {
    /// Something committed since the last pass.
    dirty: bool,
    /// When the last pass ran.
    at: Option<std::time::Instant>,
}

impl CapWatch {
    const EVERY: Duration = Duration::from_millis(200);

    async fn run(&mut self, engine: &Arc<Engine>, every_second: bool) {
        if !(self.dirty || every_second) {
            return;
        }
        if !every_second && self.at.is_some_and(|at| at.elapsed() < Self::EVERY) {
            return;
        }
        self.dirty = false;
        self.at = Some(std::time::Instant::now());
        if let Err(e) = engine.check_caps().await {
            tracing::warn!("checking the caps of running threads failed: {e}");
        }
    }
}

/// `--report-status`: the status of this session's whole tree (`store::status::of_tree`: its
/// threads by condition, what it spent), sent as a `status` notification when it differs from
/// the last one sent. Read again after a commit, at most every [`StatusLine::EVERY`] (a commit
/// in between is read at the next poll), and each second whatever happened, since a stall is a
/// matter of time. Nothing is sent while the tree has nothing to show and never had.
#[derive(Default)]
struct StatusLine {
    /// What the client was last told (at first: nothing).
    last: crate::store::status::TreeStatus,
    /// Something committed since the last read.
    dirty: bool,
    /// When it was last read.
    at: Option<std::time::Instant>,
}

impl StatusLine {
    /// The least time between two reads that follow commits.
    const EVERY: Duration = Duration::from_millis(200);

    fn changed(&mut self) {
        self.dirty = true;
    }

    /// Reads the status when a commit (or `every_second`) calls for it and sends it if it
    /// changed.
    fn report(&mut self, engine: &Engine, conn: &Conn, out: &Output, every_second: bool) {
        let cfg = engine.config();
        if !cfg.report_status || !(self.dirty || every_second) {
            return;
        }
        if !every_second && self.at.is_some_and(|at| at.elapsed() < Self::EVERY) {
            return;
        }
        self.dirty = false;
        self.at = Some(std::time::Instant::now());
        match crate::store::status::of_tree(conn, cfg.self_id.as_ref(), &cfg.session_id) {
            Ok(now) if now != self.last => {
                let sent = out.send(crate::serve::output::Notification {
                    method: "status",
                    params: crate::contract::status::StatusNotice::of(&now),
                });
                if sent.is_ok() {
                    self.last = now;
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!("reading the tree's status failed: {e}"),
        }
    }
}

/// Emits the notices due to this session's caller, each once. Contract A's (kind `notice`)
/// wait while a `wait` holds their thread, and with `THREADBASE_NOTICES=off` are marked
/// delivered without going out.
fn deliver_notices(
    conn: &Conn,
    store: &Store,
    engine: &Engine,
    session_id: &SessionId,
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

/// The restore pass (the one `serve` runs at start and `threadbase restore` runs on demand),
/// on a blocking thread: every live thread whose owning process is gone is closed as stale
/// (contract B: paused), its leftover process group killed when pid and start time match. A
/// pass with nothing to do is one read of the live threads and a liveness check of each owner.
/// Issue 45: this serve's stalled children ([`crate::runtime::Runtime::check_stalls`]).
async fn check_stalls(engine: &Arc<Engine>) {
    if let Err(e) = engine.runtime().check_stalls().await {
        tracing::warn!("the stall check failed: {e}");
    }
}

async fn restore_dead_owners(engine: &Arc<Engine>) {
    let store = engine.store().clone();
    let me = engine.runtime().owner();
    let pass = tokio::task::spawn_blocking(move || crate::engine::restore_dead_owners(&store, me));
    match pass.await {
        Ok(Ok(report)) => {
            if !report.restored.is_empty() {
                tracing::info!(threads = ?report.restored, "restored threads whose serve is gone");
            }
            for rejected in &report.rejected {
                tracing::warn!("restore refused a registry: {rejected}");
            }
        }
        Ok(Err(e)) => tracing::warn!("the owners check failed: {e}"),
        Err(e) => tracing::warn!("the owners check stopped: {e}"),
    }
}

/// Refreshes this serve's heartbeat (its host's lease), on a blocking thread. The first one to
/// succeed after some failed (or after one that took longer than its period) records when the
/// serve's heartbeats last succeeded before: the database was away meanwhile, and no host
/// counts as unreachable until a lease after it came back (issue 46, the view `host_lease`).
/// The row also records whether the row watcher holds no connection ([`Supervision::mark`]).
/// Returns whether it succeeded; a failure is recorded in `supervision` until one does.
async fn beat(
    engine: &Arc<Engine>,
    beats: &mut crate::store::hosts::Heartbeats,
    supervision: &Supervision,
) -> bool {
    loop {
        let store = engine.store().clone();
        let me = engine.runtime().owner();
        let gap_from = beats.gap_from().map(str::to_string);
        let mark = supervision.mark();
        let started = std::time::Instant::now();
        let beat = tokio::task::spawn_blocking(move || {
            let beat = store.write_facts(|tx| {
                crate::store::hosts::heartbeat(tx, me, gap_from.as_deref(), mark.as_ref())
            })?;
            store.note_other_hosts(beat.others);
            Ok::<_, crate::error::Error>(beat.at)
        });
        let failure = match beat.await {
            Ok(Ok(at)) => {
                if let Some(was) = supervision.running(Part::Heartbeat) {
                    tracing::warn!(
                        "the host's heartbeat is written again (it failed from {}: {})",
                        was.since,
                        was.reason
                    );
                }
                if beats.succeeded(at, started.elapsed()) {
                    continue;
                }
                return true;
            }
            Ok(Err(e)) => e.message,
            Err(e) => format!("the heartbeat's task stopped: {e}"),
        };
        beats.failed();
        if supervision.failed(Part::Heartbeat, &failure) {
            tracing::error!("the host's heartbeat failed: {failure}; retrying with a backoff");
        } else {
            tracing::debug!("the host's heartbeat failed again: {failure}");
        }
        return false;
    }
}

/// The row watcher's connection (the change feed) and when to try again to open it.
struct Feed {
    watch: Option<crate::store::ChangeWatch>,
    supervision: Arc<Supervision>,
    retry: Backoff,
    /// When the next attempt is due while there is no connection.
    due_at: std::time::Instant,
    /// Attempts that failed since the connection was last held.
    failures: u32,
}

impl Feed {
    fn new(supervision: Arc<Supervision>) -> Feed {
        Feed {
            watch: None,
            supervision,
            retry: supervision::retry(supervision::FEED_CAP),
            due_at: std::time::Instant::now(),
            failures: 0,
        }
    }

    /// The connection, for the reads of what changed; called only while it is held (the
    /// loop checks first). Borrowed per call, never across an await (it is not `Sync`).
    fn conn(&self) -> &crate::store::Conn {
        self.watch
            .as_ref()
            .expect("the row watcher reads only while it holds its connection")
            .conn()
    }

    fn due(&self) -> bool {
        std::time::Instant::now() >= self.due_at
    }

    /// Tries to open the connection (on a blocking thread: connecting waits for the server).
    /// Returns whether it is held.
    async fn open(&mut self, store: &Arc<crate::store::Store>) -> bool {
        let store = store.clone();
        let opened = tokio::task::spawn_blocking(move || store.change_watch()).await;
        match opened {
            Ok(Ok(watch)) => {
                self.watch = Some(watch);
                self.retry.reset();
                if let Some(was) = self.supervision.running(Part::Feed) {
                    tracing::warn!(
                        attempts = self.failures + 1,
                        "the row watcher holds its database connection again; supervision runs (it did not from {}: {})",
                        was.since,
                        was.reason
                    );
                }
                self.failures = 0;
                true
            }
            Ok(Err(e)) => {
                self.lost(&e.message);
                false
            }
            Err(e) => {
                self.lost(&format!("the connecting task stopped: {e}"));
                false
            }
        }
    }

    /// The connection could not be had (or was lost and could not be reopened): the serve is
    /// degraded until an attempt, after the backoff's delay, succeeds.
    fn lost(&mut self, why: &str) {
        self.watch = None;
        self.failures += 1;
        let wait = self.retry.failed();
        self.due_at = std::time::Instant::now() + wait;
        if self.supervision.failed(Part::Feed, why) {
            tracing::error!(
                "the row watcher could not open its database connection ({why}); supervision is not running (commands and notices wait) and every answer says so; retrying in {} ms, backing off to {} s",
                wait.as_millis(),
                supervision::FEED_CAP.as_secs()
            );
        } else {
            tracing::debug!(
                attempts = self.failures,
                "the row watcher still has no database connection ({why}); retrying in {} ms",
                wait.as_millis()
            );
        }
    }
}

fn pending_commands(conn: &Conn, engine: &Engine) -> Result<Vec<PendingCommand>> {
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
            CommandKind::Send | CommandKind::Resume | CommandKind::Merge => queues.push(engine, c),
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
        // A thread still waiting in the queue is taken out of it, never launched.
        CommandKind::Stop | CommandKind::ForceStop
            if engine.stop_queued(&c.thread_id).unwrap_or(false) =>
        {
            Ok(crate::engine::STOPPED.to_string())
        }
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
        CommandKind::Send | CommandKind::Resume | CommandKind::Merge => {
            engine
                .carry_out(c.kind, &c.thread_id, c.payload.as_deref())
                .await
        }
    };
    let structured = matches!(
        c.kind,
        CommandKind::Send | CommandKind::Resume | CommandKind::Merge
    );
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
