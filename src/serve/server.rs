//! `threadbase serve`: the JSON-lines server one Pi session talks to. Requests run
//! concurrently (a long `wait` does not hold up a `poll`), responses and notifications go out
//! through one writer, one line each. On stdin EOF (or SIGTERM, SIGHUP, SIGINT: what Pi's
//! shutdown sends its process group) every live child is stopped gracefully, every request
//! already read gets its answer (cancelled with `closed` if still running 5 s later), and the
//! server exits 0.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::engine::Engine;
use crate::error::{Error, ErrorCode};
use crate::serve::output::{Output, Reply};

/// Longest request line accepted; longer lines get an error response and are skipped.
pub const MAX_REQUEST_BYTES: usize = 8 << 20;

/// How long requests already read may run on after stdin closes before they are cancelled.
const SHUTDOWN_ANSWER_GRACE: Duration = Duration::from_secs(5);

/// Stops this serve's live children and records what contract B needs around it. The queue
/// closes first: a close during the shutdown must not launch a queued thread.
async fn stop_children(engine: &Engine) {
    engine.close_queue().await;
    engine.agents().before_shutdown();
    engine.runtime().shutdown().await;
    engine.agents().after_shutdown();
}

/// Drops a finished request from the map of requests still owed an answer. One that did not
/// finish by itself still gets its answer: `closed` when shutdown cancelled it, `internal` when
/// it panicked.
fn answer_if_unfinished(
    pending: &mut HashMap<tokio::task::Id, Value>,
    done: Result<(tokio::task::Id, ()), tokio::task::JoinError>,
    out: &Output,
) {
    let (task, failure) = match done {
        Ok((task, ())) => (task, None),
        Err(e) if e.is_panic() => (e.id(), Some(Error::new(ErrorCode::Internal, "serve failed inside this request (a bug). Repair: run `threadbase check` to verify the database, and report the request with serve's stderr."))),
        Err(e) => (e.id(), Some(Error::new(ErrorCode::Closed, format!(
            "serve was shutting down (stdin closed or a stop signal) before this request finished, so it was cancelled after {} s. Repair: send the request again to a running serve; `threadbase list` shows what was recorded.",
            SHUTDOWN_ANSWER_GRACE.as_secs()
        )))),
    };
    if let (Some(id), Some(e)) = (pending.remove(&task), failure) {
        out.respond_error(&id, &e);
    }
}

/// Serves `engine` on stdin/stdout until stdin closes. Run it as a task on a runtime worker
/// (`tokio::spawn`), not on the thread blocking on the runtime: the worker the reactor wakes
/// for a request line then reads it, runs the request and writes the response without
/// waking another thread.
pub async fn serve(engine: Arc<Engine>) {
    // stdin driven by the reactor (see `stdio`; the guard restores its flags); stdout written
    // by a thread of its own with blocking writes (see `output`).
    let (stdin, _stdin_flags) = crate::serve::stdio::stdin();
    let (out_tx, write_lines) = Output::stdout();
    let writer = tokio::spawn(write_lines);
    // What of this serve's supervision is not running (issue 46): the watcher records it,
    // and each answer is preceded by a note while anything is not.
    let supervision = Arc::new(crate::serve::supervision::Supervision::default());
    let watcher = tokio::spawn(tracing::Instrument::in_current_span(
        crate::serve::watcher::run(engine.clone(), out_tx.clone(), supervision.clone()),
    ));
    let mut reader = BufReader::with_capacity(64 * 1024, stdin);
    let mut signals = shutdown_signals();
    let mut requests = tokio::task::JoinSet::new();
    // The JSON-RPC id of every request still running, by task, so a request cancelled at
    // shutdown still gets its one answer.
    let mut pending: HashMap<tokio::task::Id, Value> = HashMap::new();
    let mut buf = Vec::new();
    // Readers' page caches grow during a burst of requests and are cut back after a pause.
    let trim = crate::store::ReaderTrim::start(engine.store().clone());
    tracing::debug!("serving");
    loop {
        buf.clear();
        let line = tokio::select! {
            line = read_request_line(&mut reader, &mut buf) => line,
            _ = signals.recv() => LineRead::Eof,
        };
        match line {
            LineRead::Eof => break,
            LineRead::TooLong(n) => {
                out_tx.respond_error(&Value::Null, &Error::invalid(format!(
                    "The request line is {n} bytes, over the {MAX_REQUEST_BYTES}-byte limit; it was skipped. Repair: send smaller requests (one JSON object per line)."
                )));
            }
            LineRead::Line => {
                if buf.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                trim.touch();
                tracing::trace!("request line read");
                let request: Value = match serde_json::from_slice(&buf) {
                    Ok(v @ Value::Object(_)) => v,
                    Ok(_) | Err(_) => {
                        let why = match serde_json::from_slice::<Value>(&buf) {
                            Err(e) => format!("not valid JSON ({e})"),
                            Ok(_) => "not a JSON object".to_string(),
                        };
                        out_tx.respond_error(&Value::Null, &Error::invalid(format!(
                            "The request line is {why}. Repair: send one JSON object per line: {{\"id\": 1, \"method\": \"thread\", \"params\": {{\"action\": \"list\"}}}}."
                        )));
                        continue;
                    }
                };
                // A `start` takes its turn here, in the order the lines are read.
                let turn = match (request.get("method"), request.get("params")) {
                    (Some(Value::String(m)), Some(p)) => engine.arrive(m, p),
                    _ => None,
                };
                let engine = engine.clone();
                let out = out_tx.clone();
                let supervision = supervision.clone();
                let request_id = request.get("id").cloned().unwrap_or(Value::Null);
                let span = tracing::info_span!(
                    "request",
                    method = %request.get("method").and_then(serde_json::Value::as_str).unwrap_or(""),
                    id = %request_id
                );
                // Boxed: the task then holds a pointer, not the whole request future (several
                // KB, copied as the task is created and finished).
                let task = requests.spawn(Box::pin(
                    counting(request_id.clone(), async move {
                        let id = request.get("id").cloned().unwrap_or(Value::Null);
                        let answer = handle(&engine, &request, &out, turn).await;
                        if answer.is_ok() && engine.config().report_usage {
                            tell_spend(&engine, &request, &id, &out);
                        }
                        tell_degraded(&supervision, &id, &out);
                        match answer {
                            Ok(Reply::Result(write)) => {
                                out.result(&id, write, engine.config().wire)
                            }
                            // A list, written as it is read, on this worker (it moves the
                            // worker's other tasks away itself once it is long).
                            Ok(Reply::Stream(write)) => out.stream(&id, write),
                            Err(e) => {
                                tracing::debug!(code = e.code.as_str(), "refused: {}", e.message);
                                out.respond_error(&id, &e)
                            }
                        }
                        tracing::debug!("answered");
                    })
                    .instrument(span),
                ));
                pending.insert(task.id(), request_id);
            }
        }
        // Reap finished request tasks so the set and the pending map do not grow.
        while let Some(done) = requests.try_join_next_with_id() {
            answer_if_unfinished(&mut pending, done, &out_tx);
        }
    }
    // Stop the children first (so pending waits settle), then let every request already read
    // finish and answer; what still runs at the deadline is cancelled with an answer. Children
    // started by requests meanwhile are stopped once no request can start another.
    stop_children(&engine).await;
    let deadline = tokio::time::Instant::now() + SHUTDOWN_ANSWER_GRACE;
    let _ = tokio::time::timeout_at(deadline, async {
        while let Some(done) = requests.join_next_with_id().await {
            answer_if_unfinished(&mut pending, done, &out_tx);
        }
    })
    .await;
    requests.abort_all();
    while let Some(done) = requests.join_next_with_id().await {
        answer_if_unfinished(&mut pending, done, &out_tx);
    }
    if !engine.runtime().live_ids().is_empty() {
        stop_children(&engine).await;
    }
    watcher.abort();
    drop(out_tx);
    let _ = writer.await;
}

/// A channel that yields once SIGTERM, SIGHUP or SIGINT arrives.
fn shutdown_signals() -> mpsc::Receiver<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = mpsc::channel(1);
    for kind in [
        SignalKind::terminate(),
        SignalKind::hangup(),
        SignalKind::interrupt(),
    ] {
        let Ok(mut stream) = signal(kind) else {
            continue;
        };
        let tx = tx.clone();
        tokio::spawn(async move {
            if stream.recv().await.is_some() {
                let _ = tx.send(()).await;
            }
        });
    }
    rx
}

enum LineRead {
    Line,
    TooLong(usize),
    Eof,
}

async fn read_request_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
) -> LineRead {
    let mut total = 0usize;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok(c) => c,
            Err(_) => return LineRead::Eof,
        };
        if chunk.is_empty() {
            return if total == 0 {
                LineRead::Eof
            } else if total > MAX_REQUEST_BYTES {
                LineRead::TooLong(total)
            } else {
                LineRead::Line
            };
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let piece = &chunk[..if done { take - 1 } else { take }];
        total += piece.len();
        if total <= MAX_REQUEST_BYTES {
            buf.extend_from_slice(piece);
        } else {
            buf.clear();
        }
        reader.consume(take);
        if done {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return if total > MAX_REQUEST_BYTES {
                LineRead::TooLong(total)
            } else {
                LineRead::Line
            };
        }
    }
}

/// A request's task: with `THREADBASE_TEST_COUNT_STATEMENTS=1` (tests), the statements the
/// store ran for it (`store::counted`, its answer written included) go to stderr once it is
/// answered, as `threadbase: request ID ran N statements, W writes`.
async fn counting(id: Value, task: impl std::future::Future<Output = ()>) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*ON
        .get_or_init(|| std::env::var("THREADBASE_TEST_COUNT_STATEMENTS").is_ok_and(|v| v == "1"))
    {
        return task.await;
    }
    let ((), n) = crate::store::counted::count(task).await;
    eprintln!(
        "threadbase: request {id} ran {} statements, {} writes",
        n.statements, n.writes
    );
}

/// Issue 46: while this serve's supervision is not running, a `supervision` notification
/// right before each answer (one writer, so in that order) says what, since when and why
/// (`docs/serve-protocol.md`). Nothing is sent while it runs: an atomic load per answer.
fn tell_degraded(supervision: &crate::serve::supervision::Supervision, id: &Value, out: &Output) {
    if let Some(note) = supervision.note() {
        let _ = out.send(crate::serve::output::Notification {
            method: "supervision",
            params: crate::serve::supervision::SupervisionNotice {
                request_id: id,
                note,
            },
        });
    }
}

/// `--report-usage`: the spend below this session not reported yet goes out as a `usage`
/// notification right before the answer (one writer, so in that order), for the extension to
/// add to the tool result. Not for `session_usage`, which answers no tool call.
fn tell_spend(engine: &Engine, request: &Value, id: &Value, out: &Output) {
    if request.get("method").and_then(Value::as_str) == Some("session_usage") {
        return;
    }
    match engine.tell_spend() {
        Ok(u) if !u.is_zero() => {
            let _ = out.send(crate::serve::output::Notification {
                method: "usage",
                params: crate::engine::spend::UsageNotice {
                    request_id: id,
                    usage: crate::engine::spend::PiUsage::of(&u),
                },
            });
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(
            "the spend below this session was not reported: {}",
            e.message
        ),
    }
}

async fn handle(
    engine: &Engine,
    request: &Value,
    out: &Output,
    turn: Option<crate::engine::StartTurn>,
) -> Result<Reply, Error> {
    let method = request.get("method").and_then(Value::as_str).ok_or_else(|| {
        Error::invalid("The request has no method. Repair: send {\"id\": 1, \"method\": \"thread\", \"params\": {…}}.")
    })?;
    let empty = Value::Object(Default::default());
    let params = request.get("params").unwrap_or(&empty);
    let req = crate::contract::request::parse(method, params)?;
    let request_id = request.get("id").cloned().unwrap_or(Value::Null);
    let out = out.clone();
    let progress = move |details: &crate::contract::thread::Details| {
        let _ = out.send(crate::serve::output::Notification {
            method: "progress",
            params: crate::serve::output::Progress {
                request_id: &request_id,
                details,
            },
        });
    };
    engine.run(req, &progress, turn).await
}
