//! The ingest writer: one thread that turns a stream of small facts (events, phase changes,
//! text, stderr bytes) into batched transactions, so a streaming child costs neither a commit
//! per delta nor unbounded memory (the channel is bounded; a full channel slows the reader,
//! which slows the child through its pipe).
//!
//! A batch commits when it holds [`MAX_BATCH`] operations, when [`MAX_DELAY`] has passed since
//! its first operation, or at a flush barrier or an ordered write (whose sender waits for it).
//! Operations apply in the order they were sent. While a batch is open and the channel is
//! empty the writer sleeps until the batch is due; senders of a flush or a write wake it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::{named_params, Transaction};
use tokio::sync::{mpsc, oneshot};

use crate::error::Result;
use crate::store::events::{self, NewEvent};
use crate::store::Store;

/// Operations per transaction at most.
pub const MAX_BATCH: usize = 4096;
/// Longest time an operation waits for its batch to commit.
pub const MAX_DELAY: Duration = Duration::from_millis(3);
/// Retained stderr bytes per thread.
pub const STDERR_TAIL_BYTES: usize = 12_000;
const CHANNEL_CAPACITY: usize = 16_384;

/// An ordered write closure, for writes that must follow the events sent before them.
pub type WriteFn = Box<dyn FnOnce(&Transaction<'_>) -> Result<()> + Send>;

/// One fact to record.
pub enum IngestOp {
    Event {
        thread_id: Arc<str>,
        at: String,
        kind: &'static str,
        data: String,
    },
    Phase {
        thread_id: Arc<str>,
        at: String,
        phase: &'static str,
    },
    AssistantText {
        thread_id: Arc<str>,
        text: String,
    },
    PartialText {
        thread_id: Arc<str>,
        text: String,
    },
    TurnOpen {
        thread_id: Arc<str>,
        open: bool,
    },
    Stderr {
        thread_id: Arc<str>,
        bytes: Vec<u8>,
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
        f: impl FnOnce(&Transaction<'_>) -> Result<T> + Send + 'static,
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
                .ok_or_else(|| crate::error::Error::internal("the ingest write produced no value")),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(crate::error::Error::internal("the ingest writer stopped")),
        }
    }
}

fn writer_loop(store: Arc<Store>, mut rx: mpsc::Receiver<IngestOp>) {
    let mut batch: Vec<IngestOp> = Vec::with_capacity(MAX_BATCH);
    // Operations come off the channel in runs (`recv_many` hands back their permits at once).
    while rx.blocking_recv_many(&mut batch, MAX_BATCH) > 0 {
        let due = Instant::now() + MAX_DELAY;
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
    if ops.is_empty() {
        return;
    }
    if store.write(|tx| apply(tx, ops)).is_ok() {
        return;
    }
    for op in ops {
        if let Err(e) = store.write(|tx| apply(tx, std::slice::from_ref(op))) {
            eprintln!("threadbase: dropped one ingest operation: {e}");
        }
    }
}

fn apply(tx: &Transaction<'_>, ops: &[IngestOp]) -> Result<()> {
    // Events are grouped per thread (order kept within a thread); text and stderr coalesce to
    // their last value or their concatenation.
    let mut events_by_thread: Vec<(&str, Vec<NewEvent<'_>>)> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut partial: HashMap<&str, &str> = HashMap::new();
    let mut stderr: HashMap<&str, Vec<u8>> = HashMap::new();
    let mut last: Option<(&Arc<str>, usize)> = None;
    for op in ops {
        match op {
            IngestOp::Event {
                thread_id,
                at,
                kind,
                data,
            } => {
                // A child's events come in runs: look the thread up only when it changes.
                let i = match last {
                    Some((id, i)) if Arc::ptr_eq(id, thread_id) => i,
                    _ => {
                        let i = *index.entry(thread_id).or_insert_with(|| {
                            events_by_thread.push((thread_id, Vec::new()));
                            events_by_thread.len() - 1
                        });
                        last = Some((thread_id, i));
                        i
                    }
                };
                events_by_thread[i].1.push(NewEvent { at, kind, data });
            }
            IngestOp::Phase {
                thread_id,
                at,
                phase,
            } => {
                let mut stmt = tx.prepare_cached(include_str!("../../sql/thread_set_phase.sql"))?;
                stmt.execute(named_params! {":phase": phase, ":at": at, ":id": &**thread_id})?;
            }
            IngestOp::AssistantText { thread_id, text } => {
                partial.remove(&**thread_id);
                let mut stmt =
                    tx.prepare_cached(include_str!("../../sql/output_set_assistant.sql"))?;
                stmt.execute((&**thread_id, text))?;
            }
            IngestOp::PartialText { thread_id, text } => {
                partial.insert(thread_id, text);
            }
            IngestOp::TurnOpen { thread_id, open } => {
                let mut stmt =
                    tx.prepare_cached(include_str!("../../sql/output_set_turn_open.sql"))?;
                stmt.execute((&**thread_id, *open))?;
            }
            IngestOp::Stderr { thread_id, bytes } => {
                stderr
                    .entry(thread_id)
                    .or_default()
                    .extend_from_slice(bytes);
            }
            IngestOp::Write(..) | IngestOp::Flush(_) => {}
        }
    }
    for (thread_id, evs) in &events_by_thread {
        events::append(tx, thread_id, evs)?;
    }
    for (thread_id, text) in partial {
        let mut stmt = tx.prepare_cached(include_str!("../../sql/output_set_partial.sql"))?;
        stmt.execute((thread_id, text))?;
    }
    for (thread_id, bytes) in stderr {
        append_stderr(tx, thread_id, &bytes)?;
    }
    Ok(())
}

fn append_stderr(tx: &Transaction<'_>, thread_id: &str, bytes: &[u8]) -> Result<()> {
    let mut get = tx.prepare_cached(include_str!("../../sql/output_get_stderr.sql"))?;
    let (mut tail, mut dropped): (Vec<u8>, i64) = get
        .query_row([thread_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap_or((Vec::new(), 0));
    tail.extend_from_slice(bytes);
    if tail.len() > STDERR_TAIL_BYTES {
        let cut = tail.len() - STDERR_TAIL_BYTES;
        dropped += cut as i64;
        tail.drain(..cut);
    }
    let mut set = tx.prepare_cached(include_str!("../../sql/output_set_stderr.sql"))?;
    set.execute((thread_id, tail, dropped))?;
    Ok(())
}
