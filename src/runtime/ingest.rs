//! The ingest writer: one thread that turns a stream of small facts (events, phase changes,
//! text, stderr bytes) into batched transactions, so a streaming child costs neither a commit
//! per delta nor unbounded memory (the channel is bounded; a full channel slows the reader,
//! which slows the child through its pipe).
//!
//! A batch commits when it holds [`MAX_BATCH`] operations, when [`MAX_DELAY`] has passed since
//! its first operation ([`MAX_DELAY_POSTGRES`] on PostgreSQL), or at a flush barrier or an ordered write (whose sender waits for it).
//! Operations apply in the order they were sent. While a batch is open and the channel is
//! empty the writer sleeps until the batch is due; senders of a flush or a write wake it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use crate::domain::{Phase, ThreadId};
use crate::error::Result;
use crate::store::events::{self, NewEvent};
use crate::store::usage::{self, Usage};
use crate::store::Store;
use crate::store::Tx;
use crate::store::{lifecycle, notices, output};

/// Operations per transaction at most.
pub const MAX_BATCH: usize = 4096;
/// Longest time an operation waits for its batch to commit.
pub const MAX_DELAY: Duration = Duration::from_millis(3);
/// [`MAX_DELAY`] on PostgreSQL, where a commit costs a round trip and a WAL flush on the
/// server, shared by every serve of the team: batches of 20 ms instead of 3 cut a streaming
/// team's commits about fivefold (`team_load` of `benches/team.rs`), still well inside
/// DESIGN's "visible to readers within 50 ms". A flush (a poll or wait of the thread) commits
/// at once either way.
pub const MAX_DELAY_POSTGRES: Duration = Duration::from_millis(20);
/// Retained stderr bytes per thread.
pub const STDERR_TAIL_BYTES: usize = 12_000;
/// Operations waiting for the writer at most (a full channel slows the children's readers);
/// also the bound of what is held in memory while the database cannot be reached.
pub const CHANNEL_CAPACITY: usize = 16_384;
/// The longest wait between two tries of a batch while the database cannot be reached.
pub const OUTAGE_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// An ordered write closure, for writes that must follow the events sent before them.
/// It can run more than once: a PostgreSQL write that lost a deadlock is retried whole.
pub type WriteFn = Box<dyn FnMut(&Tx<'_>) -> Result<()> + Send>;

/// One fact to record.
pub enum IngestOp {
    Event {
        thread_id: Arc<ThreadId>,
        at: String,
        kind: &'static str,
        data: String,
    },
    Phase {
        thread_id: Arc<ThreadId>,
        at: String,
        phase: Phase,
    },
    AssistantText {
        thread_id: Arc<ThreadId>,
        text: String,
    },
    PartialText {
        thread_id: Arc<ThreadId>,
        text: String,
    },
    TurnOpen {
        thread_id: Arc<ThreadId>,
        open: bool,
    },
    /// The last turn's error (`None`: a new turn began); the last one of a batch wins.
    TurnError {
        thread_id: Arc<ThreadId>,
        at: String,
        error: Option<String>,
    },
    /// The child said something (any line); the last one of a batch wins.
    Activity {
        thread_id: Arc<ThreadId>,
        at: String,
    },
    /// A `get_state` answer's session name and pending message count (the last one wins).
    SessionState {
        thread_id: Arc<ThreadId>,
        name: Option<String>,
        pending: Option<i64>,
    },
    Stderr {
        thread_id: Arc<ThreadId>,
        bytes: Vec<u8>,
    },
    /// A completed assistant message's usage, added to `thread_usage` in this batch.
    Usage {
        thread_id: Arc<ThreadId>,
        at: String,
        usage: Usage,
    },
    /// An ordered write; the sender hears its outcome after the commit.
    Write(WriteFn, oneshot::Sender<Result<()>>),
    Flush(oneshot::Sender<()>),
}

/// The sending side; cheap to clone.
#[derive(Clone)]
pub struct Ingest {
    tx: mpsc::Sender<IngestOp>,
    /// The writer thread, woken early for operations someone waits on.
    writer: std::thread::Thread,
}

impl IngestOp {
    /// A flush or an ordered write: someone waits for its commit, so its batch ends with it.
    fn ends_batch(&self) -> bool {
        matches!(self, IngestOp::Flush(_) | IngestOp::Write(..))
    }
}

impl Ingest {
    /// Starts the writer thread for `store`. It ends when every `Ingest` clone is dropped.
    pub fn start(store: Arc<Store>) -> Ingest {
        let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
        let handle = std::thread::Builder::new()
            .name("threadbase-ingest".into())
            .spawn(move || writer_loop(store, rx))
            .expect("spawn the ingest thread");
        Ingest {
            tx,
            writer: handle.thread().clone(),
        }
    }

    /// Queues an operation, waiting for room when the channel is full.
    pub async fn send(&self, op: IngestOp) {
        let wake = op.ends_batch();
        let _ = self.tx.send(op).await;
        if wake {
            self.writer.unpark();
        }
    }

    /// Queues an operation from blocking code.
    pub fn send_blocking(&self, op: IngestOp) {
        let wake = op.ends_batch();
        let _ = self.tx.blocking_send(op);
        if wake {
            self.writer.unpark();
        }
    }

    /// Waits until everything sent before has been committed.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        self.send(IngestOp::Flush(tx)).await;
        let _ = rx.await;
    }

    /// Runs `f` in order after everything sent before, and returns its result.
    pub async fn write<T: Send + 'static>(
        &self,
        mut f: impl FnMut(&Tx<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let slot = Arc::new(std::sync::Mutex::new(None));
        let out = slot.clone();
        let (tx, rx) = oneshot::channel();
        let f: WriteFn = Box::new(move |t| {
            let value = f(t)?;
            *out.lock().unwrap_or_else(|p| p.into_inner()) = Some(value);
            Ok(())
        });
        self.send(IngestOp::Write(f, tx)).await;
        // The outcome arrives after the commit, so readers see the write once this returns.
        match rx.await {
            Ok(Ok(())) => slot
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .ok_or_else(|| {
                    crate::error::Error::internal(
                        "The ingest write produced no value. Repair: retry the request; report a bug if it persists.",
                    )
                }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(crate::error::Error::internal(
                "The ingest writer stopped (the server is shutting down). Repair: restart threadbase serve and retry.",
            )),
        }
    }
}

fn writer_loop(store: Arc<Store>, mut rx: mpsc::Receiver<IngestOp>) {
    let mut batch: Vec<IngestOp> = Vec::with_capacity(MAX_BATCH);
    let max_delay = if store.is_postgres() {
        MAX_DELAY_POSTGRES
    } else {
        MAX_DELAY
    };
    // Operations come off the channel in runs (`recv_many` hands back their permits at once).
    while rx.blocking_recv_many(&mut batch, MAX_BATCH) > 0 {
        let due = Instant::now() + max_delay;
        let mut ends = batch.iter().any(IngestOp::ends_batch);
        while !ends && batch.len() < MAX_BATCH {
            if !rx.is_empty() {
                let from = batch.len();
                if rx.blocking_recv_many(&mut batch, MAX_BATCH - from) == 0 {
                    break;
                }
                ends = batch[from..].iter().any(IngestOp::ends_batch);
                continue;
            }
            let now = Instant::now();
            if now >= due {
                break;
            }
            // One sleep per batch instead of a poll loop; `Ingest::send` unparks it for a
            // flush or a write (an unpark before the park is not lost).
            std::thread::park_timeout(due - now);
        }
        commit(&store, &mut batch);
    }
}

/// Applies a batch in one transaction; if that fails, applies each operation on its own so
/// one bad fact (say, for a deleted thread) does not lose the others. Flushes are acknowledged
/// after everything in the batch.
fn commit(store: &Store, batch: &mut Vec<IngestOp>) {
    let mut acks = Vec::new();
    if batch.iter().any(|op| matches!(op, IngestOp::Write(..))) {
        // Closures run once; apply in order, each run of plain facts in one transaction.
        let mut plain = Vec::new();
        for op in batch.drain(..) {
            match op {
                IngestOp::Write(f, done) => {
                    apply_plain(store, &plain);
                    plain.clear();
                    let _ = done.send(store.write(f));
                }
                IngestOp::Flush(ack) => acks.push(ack),
                other => plain.push(other),
            }
        }
        apply_plain(store, &plain);
    } else {
        // `apply` skips the flushes.
        apply_plain(store, batch);
        acks.extend(batch.drain(..).filter_map(|op| match op {
            IngestOp::Flush(ack) => Some(ack),
            _ => None,
        }));
    }
    for ack in acks {
        let _ = ack.send(());
    }
}

fn apply_plain(store: &Store, ops: &[IngestOp]) {
    // A batch of flushes alone (a refresh whose answer changed nothing) takes no transaction:
    // a poll of an unchanged child writes nothing, nor waits for the write lock.
    if ops.iter().all(|op| matches!(op, IngestOp::Flush(_))) {
        return;
    }
    // A database that cannot be reached (a PostgreSQL server down or restarting) keeps the
    // batch here and tries again, backing off up to OUTAGE_BACKOFF_MAX: what the children say
    // meanwhile waits in the channel (CHANNEL_CAPACITY operations), then in their pipes, and
    // nothing is lost; it is written once the server is back.
    let mut backoff = crate::time::Backoff::new(Duration::from_millis(50), OUTAGE_BACKOFF_MAX);
    let mut warned = false;
    loop {
        match store.write_facts(|tx| apply(tx, ops)) {
            Ok(()) => {
                if warned {
                    tracing::warn!("the database is reachable again; the held events were written");
                }
                return;
            }
            Err(e) if crate::store::is_connection_lost(&e) => {
                if !warned {
                    tracing::warn!(
                        "the database is unreachable; holding {} operations: {e}",
                        ops.len()
                    );
                    warned = true;
                }
                std::thread::sleep(backoff.failed());
            }
            Err(_) => break,
        }
    }
    for op in ops {
        if let Err(e) = store.write_facts(|tx| apply(tx, std::slice::from_ref(op))) {
            tracing::error!("dropped one ingest operation: {e}");
        }
    }
}

/// What one batch records for one thread. Events keep their order; the rest coalesces to what
/// decides the rows: the last assistant text and turn flag, the partial text sent after the
/// last assistant text, the decisive phase changes, the concatenated stderr.
#[derive(Default)]
struct ThreadFacts<'a> {
    events: Vec<NewEvent<'a>>,
    /// Phase changes, as `(phase, at)` in order.
    phases: Vec<(Phase, &'a str)>,
    assistant: Option<&'a str>,
    partial: Option<&'a str>,
    turn_open: Option<bool>,
    turn_error: Option<(Option<&'a str>, &'a str)>,
    activity: Option<&'a str>,
    session: Option<(Option<&'a str>, Option<i64>)>,
    stderr: Vec<u8>,
    /// The usage of the batch's completed assistant messages, summed, and when the last came.
    usage: Option<(Usage, &'a str)>,
}

fn apply(tx: &Tx<'_>, ops: &[IngestOp]) -> Result<()> {
    let mut threads: Vec<(&ThreadId, ThreadFacts<'_>)> = Vec::new();
    let mut index: HashMap<&ThreadId, usize> = HashMap::new();
    // A child's operations come in runs: look the thread up only when it changes.
    let mut last: Option<(&Arc<ThreadId>, usize)> = None;
    for op in ops {
        let thread_id = match op {
            IngestOp::Event { thread_id, .. }
            | IngestOp::Phase { thread_id, .. }
            | IngestOp::AssistantText { thread_id, .. }
            | IngestOp::PartialText { thread_id, .. }
            | IngestOp::TurnOpen { thread_id, .. }
            | IngestOp::TurnError { thread_id, .. }
            | IngestOp::Activity { thread_id, .. }
            | IngestOp::SessionState { thread_id, .. }
            | IngestOp::Stderr { thread_id, .. }
            | IngestOp::Usage { thread_id, .. } => thread_id,
            IngestOp::Write(..) | IngestOp::Flush(_) => continue,
        };
        let i = match last {
            Some((id, i)) if Arc::ptr_eq(id, thread_id) => i,
            _ => {
                let i = *index.entry(&**thread_id).or_insert_with(|| {
                    threads.push((&**thread_id, ThreadFacts::default()));
                    threads.len() - 1
                });
                last = Some((thread_id, i));
                i
            }
        };
        let facts = &mut threads[i].1;
        match op {
            IngestOp::Event { at, kind, data, .. } => {
                facts.events.push(NewEvent { at, kind, data })
            }
            IngestOp::Phase { at, phase, .. } => facts.phases.push((*phase, at)),
            IngestOp::AssistantText { text, .. } => {
                // It also clears the partial text: only a later partial survives it.
                facts.assistant = Some(text);
                facts.partial = None;
            }
            IngestOp::PartialText { text, .. } => facts.partial = Some(text),
            IngestOp::TurnOpen { open, .. } => facts.turn_open = Some(*open),
            IngestOp::TurnError { at, error, .. } => {
                facts.turn_error = Some((error.as_deref(), at))
            }
            IngestOp::Activity { at, .. } => facts.activity = Some(at),
            IngestOp::SessionState { name, pending, .. } => {
                facts.session = Some((name.as_deref(), *pending))
            }
            IngestOp::Stderr { bytes, .. } => facts.stderr.extend_from_slice(bytes),
            IngestOp::Usage { at, usage, .. } => {
                let (sum, last) = facts.usage.get_or_insert((Usage::default(), at));
                sum.add(usage);
                *last = at;
            }
            IngestOp::Write(..) | IngestOp::Flush(_) => {}
        }
    }
    for (thread_id, facts) in &threads {
        let settled_at = settles(tx, thread_id, &facts.phases)?;
        // A thread that changed phase, failed a turn or settled (a notice) is news other
        // serves act on (their notices, contract B's settled runs): announced with the commit.
        if !facts.phases.is_empty() || facts.turn_error.is_some() || settled_at.is_some() {
            tx.announce_now();
        }
        for &(phase, at) in decisive_phases(&facts.phases) {
            lifecycle::set_phase(tx, thread_id, phase, at)?;
        }
        if let Some(text) = facts.assistant {
            output::set_assistant(tx, thread_id, text)?;
        }
        if let Some(open) = facts.turn_open {
            output::set_turn_open(tx, thread_id, open)?;
        }
        if let Some((error, at)) = facts.turn_error {
            output::set_turn_error(tx, thread_id, error, at)?;
        }
        if let Some(at) = facts.activity {
            output::set_activity(tx, thread_id, at)?;
        }
        if let Some((name, pending)) = facts.session {
            output::set_session_state(tx, thread_id, name, pending)?;
        }
        events::append(tx, thread_id, &facts.events)?;
        if let Some(text) = facts.partial {
            output::set_partial(tx, thread_id, text)?;
        }
        if !facts.stderr.is_empty() {
            output::append_stderr(tx, thread_id, &facts.stderr, STDERR_TAIL_BYTES)?;
        }
        if let Some((sum, at)) = &facts.usage {
            usage::add(tx, thread_id, sum, at)?;
        }
        // After the answer and the events: the notice quotes the one and counts the other.
        if let Some(at) = settled_at {
            notices::write(tx, thread_id, notices::Cause::Settled, at)?;
        }
    }
    Ok(())
}

/// When a batch settles a thread (its last phase change is to idle after a run: a busy change
/// in the batch, or a busy row), the time of that idle change: the thread's parent is told
/// ([`notices`], contract A only). One primary-key read, only for a batch that ends idle.
fn settles<'a>(
    tx: &Tx<'_>,
    thread_id: &ThreadId,
    phases: &[(Phase, &'a str)],
) -> Result<Option<&'a str>> {
    let Some(&(Phase::Idle, at)) = phases.last() else {
        return Ok(None);
    };
    let ran = phases.iter().any(|(p, _)| *p == Phase::Busy)
        || notices::phase_before(tx, thread_id)? == Some(Phase::Busy);
    Ok(ran.then_some(at))
}

/// The phase changes of one thread in one batch that decide its row (`thread_set_phase.sql`),
/// in order: the last non-idle change (it clears `idle_started_at`), the first idle change
/// after it (it starts the idle stretch), and the last change (`updated_at`). Applying these
/// leaves the row as applying all of them would. A phase other than idle, busy or starting
/// (a stop freezes the row) keeps them all.
fn decisive_phases<'p, 'a>(phases: &'p [(Phase, &'a str)]) -> Vec<&'p (Phase, &'a str)> {
    if phases.len() <= 1
        || phases
            .iter()
            .any(|(p, _)| !matches!(p, Phase::Idle | Phase::Busy | Phase::Starting))
    {
        return phases.iter().collect();
    }
    let last_active = phases.iter().rposition(|(p, _)| *p != Phase::Idle);
    let first_idle = last_active.map_or(0, |k| k + 1);
    let mut keep: Vec<usize> = last_active.into_iter().collect();
    if first_idle < phases.len() {
        keep.push(first_idle);
    }
    keep.push(phases.len() - 1);
    keep.dedup();
    keep.into_iter().map(|i| &phases[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{SessionId, ThreadStatus};

    use crate::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec, NewThread};

    /// The batch semantics before facts were coalesced per thread: every phase, assistant and
    /// turn change runs as its own statement in order, then events, partials and stderr.
    fn reference_apply(tx: &Tx<'_>, ops: &[IngestOp]) -> Result<()> {
        let mut events_by_thread: Vec<(&ThreadId, Vec<NewEvent<'_>>)> = Vec::new();
        let mut partial: Vec<(&ThreadId, &str)> = Vec::new();
        let mut stderr: Vec<(&ThreadId, Vec<u8>)> = Vec::new();
        for op in ops {
            match op {
                IngestOp::Event {
                    thread_id,
                    at,
                    kind,
                    data,
                } => match events_by_thread
                    .iter_mut()
                    .find(|(t, _)| *t == &**thread_id)
                {
                    Some((_, evs)) => evs.push(NewEvent { at, kind, data }),
                    None => events_by_thread.push((thread_id, vec![NewEvent { at, kind, data }])),
                },
                IngestOp::Phase {
                    thread_id,
                    at,
                    phase,
                } => {
                    lifecycle::set_phase(tx, thread_id, *phase, at)?;
                }
                IngestOp::AssistantText { thread_id, text } => {
                    partial.retain(|(t, _)| *t != &**thread_id);
                    output::set_assistant(tx, thread_id, text)?;
                }
                IngestOp::PartialText { thread_id, text } => {
                    partial.retain(|(t, _)| *t != &**thread_id);
                    partial.push((thread_id, text));
                }
                IngestOp::TurnOpen { thread_id, open } => {
                    output::set_turn_open(tx, thread_id, *open)?;
                }
                IngestOp::TurnError {
                    thread_id,
                    at,
                    error,
                } => output::set_turn_error(tx, thread_id, error.as_deref(), at)?,
                IngestOp::Activity { thread_id, at } => output::set_activity(tx, thread_id, at)?,
                IngestOp::SessionState {
                    thread_id,
                    name,
                    pending,
                } => {
                    output::set_session_state(tx, thread_id, name.as_deref(), *pending)?;
                }
                IngestOp::Stderr { thread_id, bytes } => {
                    match stderr.iter_mut().find(|(t, _)| *t == &**thread_id) {
                        Some((_, b)) => b.extend_from_slice(bytes),
                        None => stderr.push((thread_id, bytes.clone())),
                    }
                }
                IngestOp::Usage {
                    thread_id,
                    at,
                    usage,
                } => usage::add(tx, thread_id, usage, at)?,
                IngestOp::Write(..) | IngestOp::Flush(_) => {}
            }
        }
        for (thread_id, evs) in &events_by_thread {
            events::append(tx, thread_id, evs)?;
        }
        for (thread_id, text) in partial {
            output::set_partial(tx, thread_id, text)?;
        }
        for (thread_id, bytes) in stderr {
            output::append_stderr(tx, thread_id, &bytes, STDERR_TAIL_BYTES)?;
        }
        Ok(())
    }

    fn store(dir: &tempfile::TempDir, name: &str, ids: &[Arc<ThreadId>]) -> Store {
        let store = Store::open(dir.path().join(name)).unwrap();
        store
            .write(|tx| {
                let manager = upsert_manager(
                    tx,
                    &ManagerSpec::new(&SessionId::new("s"), Contract::Thread, "/root"),
                )?;
                for (n, id) in ids.iter().enumerate() {
                    insert_thread(
                        tx,
                        &NewThread {
                            id: ThreadId::clone(id),
                            manager_id: manager,
                            path: format!("/root/t{n}"),
                            parent_path: Some("/root".into()),
                            name: format!("t{n}"),
                            task_name: format!("t{n}"),
                            depth: 1,
                            cwd: "/tmp".into(),
                            status: ThreadStatus::Live,
                            phase: if n == 0 { Phase::Idle } else { Phase::Starting },
                            ..NewThread::default()
                        },
                    )?;
                    output::ensure(tx, id)?;
                }
                // An idle stretch already running on the first thread.
                tx.sqlite().unwrap().execute(
                    "UPDATE threads SET idle_started_at = '2026-01-01T00:00:00.000Z' WHERE id = ?1",
                    [&*ids[0]],
                )?;
                Ok(())
            })
            .unwrap();
        store
    }

    fn snapshot(store: &Store) -> Vec<String> {
        let conn = store.read().unwrap();
        let mut rows = Vec::new();
        for sql in [
            "SELECT id, phase, updated_at, idle_started_at, last_seq, last_event_at FROM threads ORDER BY id",
            "SELECT * FROM thread_output ORDER BY thread_id",
            "SELECT * FROM thread_events ORDER BY thread_id, seq",
            // (A row's first updated_at is when its store was made.)
            "SELECT thread_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
                    cost_usd, turns, tool_calls, CASE WHEN turns > 0 THEN updated_at END
             FROM thread_usage ORDER BY thread_id",
            "SELECT root_session, threads, input_tokens, output_tokens, cache_read_tokens,
                    cache_write_tokens, cost_usd, turns, tool_calls,
                    CASE WHEN turns > 0 THEN updated_at END
             FROM tree_usage ORDER BY root_session",
        ] {
            rows.extend(crate::store::rows_as_text(&conn, sql).unwrap());
        }
        rows
    }

    /// Random batches over three threads leave the same rows, batch after batch, as the
    /// uncoalesced batches.
    #[test]
    fn coalesced_batches_match_statement_by_statement() {
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<Arc<ThreadId>> = (0..3)
            .map(|n| Arc::new(ThreadId::new(format!("thread_{n:012x}"))))
            .collect();
        let (a, b) = (store(&dir, "a.sqlite", &ids), store(&dir, "b.sqlite", &ids));
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let mut clock = 0i64;
        for round in 0..300 {
            let len = 1 + next(if round % 10 == 0 { 120 } else { 12 }) as usize;
            let ops: Vec<IngestOp> = (0..len)
                .map(|_| {
                    clock += 1 + next(3) as i64;
                    let at = crate::time::iso_from_ms(1_800_000_000_000 + clock);
                    let thread_id = ids[next(3) as usize].clone();
                    match next(9) {
                        0..=2 => IngestOp::Event {
                            thread_id,
                            at,
                            kind: ["tool_started", "turn_started", "assistant_message"]
                                [next(3) as usize],
                            data: format!("{{\"n\":{clock}}}"),
                        },
                        3 | 4 => IngestOp::Phase {
                            thread_id,
                            at,
                            phase: [Phase::Idle, Phase::Busy, Phase::Idle, Phase::Starting]
                                [next(4) as usize],
                        },
                        5 => IngestOp::AssistantText {
                            thread_id,
                            text: format!("answer {clock}"),
                        },
                        6 => IngestOp::PartialText {
                            thread_id,
                            text: format!("partial {clock}"),
                        },
                        7 if clock % 2 == 0 => IngestOp::TurnOpen {
                            thread_id,
                            open: next(2) == 0,
                        },
                        7 => IngestOp::SessionState {
                            thread_id,
                            name: (next(3) > 0).then(|| format!("name {clock}")),
                            pending: (next(3) > 0).then(|| next(4) as i64),
                        },
                        _ if clock % 3 == 0 => {
                            // Costs in 1/1024 dollars add up exactly in any grouping.
                            let n = clock as u64;
                            IngestOp::Usage {
                                thread_id,
                                at,
                                usage: Usage {
                                    input_tokens: (n * 7919 % 5000) as i64,
                                    output_tokens: (n * 104_729 % 900) as i64,
                                    cache_read_tokens: (n % 3) as i64 * 1000,
                                    cache_write_tokens: (n % 2) as i64 * 64,
                                    cost_usd: (n % 64) as f64 / 1024.0,
                                    turns: 1,
                                    tool_calls: (n % 3) as i64,
                                },
                            }
                        }
                        _ => IngestOp::Stderr {
                            thread_id,
                            bytes: format!("err {clock}\n").into_bytes(),
                        },
                    }
                })
                .collect();
            a.write(|tx| apply(tx, &ops)).unwrap();
            b.write(|tx| reference_apply(tx, &ops)).unwrap();
            assert_eq!(snapshot(&a), snapshot(&b), "after round {round}");
        }
        let rows = snapshot(&a);
        assert!(rows.iter().any(|r| r.contains("idle")) && rows.len() > 3 * 40);
        // The tree's total is the sum of its threads' rows.
        let conn = a.read().unwrap();
        let (turns, total): (i64, i64) = conn
            .sqlite()
            .unwrap()
            .query_row(
                "SELECT sum(turns), sum(input_tokens) FROM thread_usage",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let tree: (i64, i64) = conn
            .sqlite()
            .unwrap()
            .query_row("SELECT turns, input_tokens FROM tree_usage", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert!(turns > 30, "{turns}");
        assert_eq!(tree, (turns, total));
    }

    #[test]
    fn decisive_phases_keep_what_decides_the_row() {
        let p = |s: &[&'static str]| -> Vec<(Phase, &'static str)> {
            s.iter().map(|p| (Phase::parse(p).unwrap(), "t")).collect()
        };
        let kept = |s: &[&'static str]| -> Vec<&'static str> {
            decisive_phases(&p(s))
                .iter()
                .map(|x| x.0.as_str())
                .collect()
        };
        assert_eq!(
            kept(&["busy", "idle", "busy", "idle", "idle"]),
            ["busy", "idle", "idle"]
        );
        assert_eq!(kept(&["idle", "idle", "idle"]), ["idle", "idle"]);
        assert_eq!(kept(&["busy", "busy"]), ["busy"]);
        assert_eq!(kept(&["idle", "busy"]), ["busy"]);
        assert_eq!(
            kept(&["busy", "stopping", "idle"]),
            ["busy", "stopping", "idle"]
        );
    }
}
