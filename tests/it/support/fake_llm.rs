//! A scripted, loopback, OpenAI-compatible LLM server for tests that run the real Pi, plus the
//! hermetic environment to run Pi against it (docs: `shared/reference/pi-rpc.md` §15).
//!
//! Include it from an integration test with
//!
//! ```ignore
//! #[path = "support/fake_llm.rs"]
//! mod fake_llm;
//! ```
//!
//! Pi 1.6 with `"api": "openai-completions"` sends `POST /v1/chat/completions` with
//! `stream: true` and expects Server-Sent Events: `data: <chunk json>\n\n` lines ending with
//! `data: [DONE]\n\n`. Each such request consumes one scripted [`Step`] from the queue, in order.
//! Every request (any method and path) is recorded and can be read back with
//! [`FakeLlm::requests`]. When the queue is empty a completion request gets a 500 with an error
//! body that says so, which makes Pi end the run with `stopReason: "error"`.
//!
//! When several Pi processes share one fake (a parent and the children it starts), their
//! requests interleave in no fixed order. [`FakeLlm::route`] adds a one-shot step that is served
//! to the first completion request matching a predicate (checked before the queue), so a child's
//! request can be answered by content instead of by arrival order.
//!
//! HTTP is the crate's own stack (hyper's HTTP/1.1 server, as `threadbase http` uses), on a
//! one-thread tokio runtime of the fake's own: it listens on `127.0.0.1:0` and answers one
//! request per connection (`Connection: close`, as Pi sees from many providers' proxies); a
//! streamed answer has a `Content-Length` (the whole stream is known in advance) and its chunks
//! go out one at a time, each flushed, `delay` apart.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::channel::Channel;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use tokio::sync::watch;

/// The provider and model names written into `models.json` and passed as `--provider`/`--model`.
pub const PROVIDER: &str = "fake";
pub const MODEL: &str = "fake-model";
/// The literal API key written into `models.json`; Pi sends it as `authorization: Bearer …`.
pub const API_KEY: &str = "dummy-key";

// ---------------------------------------------------------------------------------------------
// Script
// ---------------------------------------------------------------------------------------------

/// One scripted answer, consumed by one `POST …/chat/completions` request.
#[derive(Clone, Debug)]
pub enum Step {
    /// A streamed text answer (`finish_reason: "stop"`). Each delta is one SSE chunk; `delay` is
    /// slept before every delta (so the first delta also comes `delay` after the headers).
    Text {
        deltas: Vec<String>,
        delay: Duration,
    },
    /// One assistant turn that calls tools (`finish_reason: "tool_calls"`). The arguments of each
    /// call are streamed in two fragments, as real providers do.
    ToolCalls(Vec<ToolCall>),
    /// Read the request, send nothing for this long (or until the client goes away or the fake
    /// is dropped), then close the connection without a response. Pi sees a network error unless
    /// it aborted first; useful to keep a run busy for `abort`/`steer` tests.
    Hang(Duration),
    /// A non-2xx status with body `{"error":{"message":…,"type":"fake_error"}}`.
    Error { status: u16, message: String },
    /// A text or tool-call step whose final chunk reports `usage` instead of the default
    /// `{prompt_tokens: 10, completion_tokens: 5}` (see [`Step::with_usage`]).
    WithUsage(Box<Step>, Usage),
}

/// The token counts a step's final chunk reports, as OpenAI-compatible providers send them
/// (`prompt_tokens` includes the cached and cache-written ones). Pi 1.6 maps them to
/// `usage.input = prompt - cached - cache_write`, `cacheRead = cached`, `cacheWrite =
/// cache_write`, `output = completion`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    pub cache_write_tokens: u64,
}

impl Usage {
    pub fn new(prompt: u64, completion: u64, cached: u64, cache_write: u64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            cached_tokens: cached,
            cache_write_tokens: cache_write,
        }
    }

    fn to_json(self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {
                "cached_tokens": self.cached_tokens,
                "cache_write_tokens": self.cache_write_tokens,
            },
        })
    }
}

/// A tool call in a [`Step::ToolCalls`] answer.
#[derive(Clone, Debug)]
pub struct ToolCall {
    /// The `toolCallId` Pi will report. Empty: the fake assigns `call_<n>`, where n counts the
    /// tool calls this fake has served (so the first is `call_1`).
    pub id: String,
    /// The tool name, e.g. `bash`.
    pub name: String,
    /// The arguments object, e.g. `{"command": "echo hi"}`.
    pub arguments: Value,
}

impl Step {
    /// A text answer sent as one delta, without delay.
    pub fn text(text: impl Into<String>) -> Step {
        Step::Text {
            deltas: vec![text.into()],
            delay: Duration::ZERO,
        }
    }

    /// A text answer streamed as `deltas`, sleeping `delay` before each.
    pub fn text_deltas<I, S>(deltas: I, delay: Duration) -> Step
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Step::Text {
            deltas: deltas.into_iter().map(Into::into).collect(),
            delay,
        }
    }

    /// One call of tool `name` with `arguments`, with an assigned id (see [`ToolCall::id`]).
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Step {
        Step::ToolCalls(vec![ToolCall {
            id: String::new(),
            name: name.into(),
            arguments,
        }])
    }

    /// One call of the built-in `bash` tool running `command`, with an assigned id.
    pub fn bash(command: impl Into<String>) -> Step {
        Step::tool_call("bash", json!({ "command": command.into() }))
    }

    /// See [`Step::Hang`].
    pub fn hang(ms: u64) -> Step {
        Step::Hang(Duration::from_millis(ms))
    }

    /// See [`Step::Error`].
    pub fn error(status: u16, message: impl Into<String>) -> Step {
        Step::Error {
            status,
            message: message.into(),
        }
    }

    /// This step, reporting `usage` in its final chunk.
    pub fn with_usage(self, usage: Usage) -> Step {
        Step::WithUsage(Box::new(self), usage)
    }
}

// ---------------------------------------------------------------------------------------------
// Recorded requests
// ---------------------------------------------------------------------------------------------

/// One HTTP request the fake received, in arrival order.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    pub method: String,
    /// The request target, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Header names lower-cased, values as sent.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Index into the script of the step this request consumed (`None`: not a completion
    /// request, the script was exhausted, or a route answered it).
    pub step: Option<usize>,
    /// Index (in the order [`FakeLlm::route`] was called) of the route that answered this
    /// request, if one did.
    pub route: Option<usize>,
}

impl RecordedRequest {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body parsed as JSON (`Value::Null` if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The `messages` array of a chat-completions body (empty if absent).
    pub fn messages(&self) -> Vec<Value> {
        self.json()["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The names of the tools offered to the model (`tools[].function.name`).
    pub fn tool_names(&self) -> Vec<String> {
        self.json()["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The text of the last `user` message (string content or the concatenated text parts).
    /// The request ends with a user message containing `needle` (a prompt's first model call,
    /// not a later step of its run).
    pub fn last_is_user(&self, needle: &str) -> bool {
        self.messages().last().is_some_and(|m| m["role"] == "user")
            && self.last_user_text().is_some_and(|t| t.contains(needle))
    }

    /// The text of the tool result the request ends with, if it ends with one.
    pub fn last_tool_result(&self) -> Option<String> {
        let messages = self.messages();
        let last = messages.last()?;
        (last["role"] == "tool").then(|| content_text(&last["content"]))
    }

    pub fn last_user_text(&self) -> Option<String> {
        let messages = self.messages();
        let msg = messages.iter().rev().find(|m| m["role"] == "user")?;
        Some(content_text(&msg["content"]))
    }
}

/// The text of an OpenAI `content` field: a string, or an array of `{type:"text",text}` parts.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------

/// A predicate over a completion request, for [`FakeLlm::route`].
pub type RequestMatcher = Box<dyn Fn(&RecordedRequest) -> bool + Send>;

/// A one-shot routed step: served to the first completion request `matcher` accepts.
struct Route {
    index: usize,
    matcher: RequestMatcher,
    step: Step,
}

#[derive(Default)]
struct State {
    script: VecDeque<Step>,
    /// Steps handed out so far (the index of the next one).
    consumed: usize,
    /// Routed steps not yet served, in the order they were added.
    routes: Vec<Route>,
    /// Routes added so far (the index of the next one).
    routes_added: usize,
    requests: Vec<RecordedRequest>,
}

struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    chunk_counter: AtomicUsize,
    tool_call_counter: AtomicUsize,
}

/// The running fake server. Dropping it stops accepting and ends hanging responses.
pub struct FakeLlm {
    port: u16,
    shared: Arc<Shared>,
    /// `true` once the fake is dropped: the server stops accepting, hangs and delays end.
    stop: watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
}

impl FakeLlm {
    /// Binds `127.0.0.1:0` and starts serving with an empty script.
    pub fn start() -> FakeLlm {
        FakeLlm::with_script(Vec::new())
    }

    /// Binds `127.0.0.1:0` and starts serving `steps` in order.
    pub fn with_script(steps: impl IntoIterator<Item = Step>) -> FakeLlm {
        let listener =
            std::net::TcpListener::bind(("127.0.0.1", 0)).expect("fake LLM: bind 127.0.0.1:0");
        let port = listener.local_addr().expect("fake LLM: local_addr").port();
        listener
            .set_nonblocking(true)
            .expect("fake LLM: nonblocking listener");
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                script: steps.into_iter().collect(),
                ..State::default()
            }),
            changed: Condvar::new(),
            chunk_counter: AtomicUsize::new(0),
            tool_call_counter: AtomicUsize::new(0),
        });
        let (stop, stopped) = watch::channel(false);
        let server = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("fake-llm-{port}"))
                .spawn(move || {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("fake LLM: tokio runtime")
                        .block_on(accept_loop(listener, shared, stopped))
                })
                .expect("fake LLM: spawn server thread")
        };
        FakeLlm {
            port,
            shared,
            stop,
            server: Some(server),
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port>/v1`, the provider `baseUrl`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Appends a step to the script.
    pub fn push(&self, step: Step) {
        self.shared.state.lock().unwrap().script.push_back(step);
    }

    /// Adds a one-shot routed step: the first completion request for which `matcher` returns
    /// true gets `step`, whatever is queued; the queue is not touched. Routes are checked before
    /// the queue, in the order they were added, and each serves one request. The matcher sees
    /// the request as recorded (`step`/`route` still `None`).
    pub fn route(&self, matcher: impl Fn(&RecordedRequest) -> bool + Send + 'static, step: Step) {
        let mut state = self.shared.state.lock().unwrap();
        let index = state.routes_added;
        state.routes_added += 1;
        state.routes.push(Route {
            index,
            matcher: Box::new(matcher),
            step,
        });
    }

    /// Routed steps (see [`FakeLlm::route`]) not yet served.
    pub fn routes_remaining(&self) -> usize {
        self.shared.state.lock().unwrap().routes.len()
    }

    /// Steps not yet consumed.
    pub fn remaining(&self) -> usize {
        self.shared.state.lock().unwrap().script.len()
    }

    /// All requests received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.state.lock().unwrap().requests.clone()
    }

    /// The chat-completion requests received so far, in order.
    pub fn completion_requests(&self) -> Vec<RecordedRequest> {
        self.requests().into_iter().filter(is_completion).collect()
    }

    /// Waits until at least `n` requests were received, or `timeout`; returns what is there.
    pub fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<RecordedRequest> {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.state.lock().unwrap();
        while state.requests.len() < n {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap()
                .0;
        }
        state.requests.clone()
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(handle) = self.server.take() {
            let _ = handle.join();
        }
    }
}

fn is_completion(r: &RecordedRequest) -> bool {
    r.method == "POST"
        && r.path
            .split('?')
            .next()
            .unwrap_or("")
            .ends_with("/chat/completions")
}

/// How long a dropped fake lets responses in flight finish before it cuts them.
const STOP_GRACE: Duration = Duration::from_secs(1);

async fn accept_loop(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("fake LLM: tokio listener");
    let mut connections = tokio::task::JoinSet::new();
    let for_connections = stopped.clone();
    loop {
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                connections.spawn(serve_connection(stream, shared.clone(), for_connections.clone()));
            }
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(STOP_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    connections.abort_all();
}

/// What the fake answers with: a JSON body, or a stream fed by a task.
type FakeBody = Either<Full<Bytes>, Channel<Bytes>>;

async fn serve_connection(
    stream: tokio::net::TcpStream,
    shared: Arc<Shared>,
    stopped: watch::Receiver<bool>,
) {
    let service =
        hyper::service::service_fn(move |req| answer(req, shared.clone(), stopped.clone()));
    let _ = http1::Builder::new()
        .keep_alive(false)
        .title_case_headers(true)
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30))
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// The error that makes hyper close the connection without a response ([`Step::Hang`], or a
/// request whose body never arrived).
fn hang_up() -> std::io::Error {
    std::io::Error::other("fake LLM: closing without a response")
}

async fn answer(
    req: hyper::Request<Incoming>,
    shared: Arc<Shared>,
    stopped: watch::Receiver<bool>,
) -> Result<hyper::Response<FakeBody>, std::io::Error> {
    let (head, body) = req.into_parts();
    let body = body.collect().await.map_err(|_| hang_up())?.to_bytes();
    let mut record = RecordedRequest {
        method: head.method.to_string(),
        path: head
            .uri
            .path_and_query()
            .map_or_else(|| head.uri.to_string(), |p| p.to_string()),
        headers: head
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
        step: None,
        route: None,
    };
    let step = {
        let mut state = shared.state.lock().unwrap();
        let step = if is_completion(&record) {
            if let Some(i) = state.routes.iter().position(|r| (r.matcher)(&record)) {
                let route = state.routes.remove(i);
                record.route = Some(route.index);
                Some(Some(route.step))
            } else {
                let step = state.script.pop_front();
                if step.is_some() {
                    record.step = Some(state.consumed);
                    state.consumed += 1;
                }
                Some(step)
            }
        } else {
            None
        };
        state.requests.push(record);
        shared.changed.notify_all();
        step
    };
    match step {
        None => Ok(json_response(
            404,
            &json!({"error": {"message": "fake LLM: not found", "type": "not_found"}}),
        )),
        Some(None) => Ok(json_response(
            500,
            &json!({"error": {"message": "fake LLM: no scripted response left", "type": "fake_script_exhausted"}}),
        )),
        Some(Some(step)) => serve_step(&shared, step, stopped).await,
    }
}

fn json_response(status: u16, body: &Value) -> hyper::Response<FakeBody> {
    let mut response = hyper::Response::new(Either::Left(Full::new(Bytes::from(body.to_string()))));
    *response.status_mut() = hyper::StatusCode::from_u16(status).expect("a valid status code");
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// Sleeps `d`; false if the fake was dropped meanwhile.
async fn sleep_unless_stopped(stopped: &mut watch::Receiver<bool>, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        _ = stopped.wait_for(|s| *s) => false,
    }
}

async fn serve_step(
    shared: &Shared,
    step: Step,
    mut stopped: watch::Receiver<bool>,
) -> Result<hyper::Response<FakeBody>, std::io::Error> {
    let mut usage = json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15});
    let mut step = step;
    while let Step::WithUsage(inner, u) = step {
        usage = u.to_json();
        step = *inner;
    }
    match step {
        Step::WithUsage(..) => unreachable!("unwrapped above"),
        // hyper drops this future when the client goes away (e.g. Pi aborted).
        Step::Hang(d) => {
            sleep_unless_stopped(&mut stopped, d).await;
            Err(hang_up())
        }
        Step::Error { status, message } => Ok(json_response(
            status,
            &json!({"error": {"message": message, "type": "fake_error"}}),
        )),
        Step::Text { deltas, delay } => {
            let mut sse = Sse::new(shared);
            sse.chunk(json!({"role": "assistant", "content": ""}), None);
            for delta in deltas {
                sse.delay(delay);
                sse.chunk(json!({"content": delta}), None);
            }
            sse.chunk(json!({}), Some("stop"));
            Ok(sse.finish(usage, stopped))
        }
        Step::ToolCalls(calls) => {
            let mut sse = Sse::new(shared);
            sse.chunk(json!({"role": "assistant", "content": null}), None);
            for (index, call) in calls.iter().enumerate() {
                let id = if call.id.is_empty() {
                    format!(
                        "call_{}",
                        shared.tool_call_counter.fetch_add(1, Ordering::SeqCst) + 1
                    )
                } else {
                    call.id.clone()
                };
                sse.chunk(
                    json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                        "function": {"name": call.name, "arguments": ""}}]}),
                    None,
                );
                let args = call.arguments.to_string();
                let mid = args
                    .char_indices()
                    .map(|(i, _)| i)
                    .nth(args.chars().count() / 2)
                    .unwrap_or(0);
                for fragment in [&args[..mid], &args[mid..]] {
                    sse.chunk(json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}), None);
                }
            }
            sse.chunk(json!({}), Some("tool_calls"));
            Ok(sse.finish(usage, stopped))
        }
    }
}

/// An OpenAI chat-completions event stream, built in full, then sent event by event.
struct Sse {
    id: String,
    /// Each `data: …` event, with the pause before it.
    events: Vec<(Duration, Bytes)>,
    pause: Duration,
}

impl Sse {
    fn new(shared: &Shared) -> Sse {
        let n = shared.chunk_counter.fetch_add(1, Ordering::SeqCst);
        Sse {
            id: format!("chatcmpl-fake-{n}"),
            events: Vec::new(),
            pause: Duration::ZERO,
        }
    }

    /// Sleep `d` before the next event.
    fn delay(&mut self, d: Duration) {
        self.pause = d;
    }

    fn send(&mut self, data: &str) {
        let pause = std::mem::take(&mut self.pause);
        self.events
            .push((pause, Bytes::from(format!("data: {data}\n\n"))));
    }

    fn chunk(&mut self, delta: Value, finish_reason: Option<&str>) {
        let chunk = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": 1, "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        });
        self.send(&chunk.to_string());
    }

    /// Adds the usage chunk and `[DONE]`; the response streams the events from a task.
    fn finish(
        mut self,
        usage: Value,
        mut stopped: watch::Receiver<bool>,
    ) -> hyper::Response<FakeBody> {
        let usage = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": 1, "model": MODEL,
            "choices": [], "usage": usage,
        });
        self.send(&usage.to_string());
        self.send("[DONE]");
        let length: usize = self.events.iter().map(|(_, e)| e.len()).sum();
        let (mut tx, body) = Channel::<Bytes>::new(1);
        tokio::spawn(async move {
            for (pause, event) in self.events {
                if !pause.is_zero() && !sleep_unless_stopped(&mut stopped, pause).await {
                    return;
                }
                if tx.send_data(event).await.is_err() {
                    return; // the client went away
                }
            }
        });
        let mut response = hyper::Response::new(Either::Right(body));
        let headers = response.headers_mut();
        for (name, value) in [
            (hyper::header::CONTENT_TYPE, "text/event-stream"),
            (hyper::header::CACHE_CONTROL, "no-cache"),
        ] {
            headers.insert(name, hyper::header::HeaderValue::from_static(value));
        }
        headers.insert(hyper::header::CONTENT_LENGTH, length.into());
        response
    }
}

// ---------------------------------------------------------------------------------------------
// Finding Pi
// ---------------------------------------------------------------------------------------------

/// The argv prefix that runs Pi 1.6: `$THREADBASE_TEST_PI` (a JSON array of strings) if set,
/// else `<repo>/tools/pi/pi` if `.ci/install-pi` has installed it, else `None`.
pub fn find_pi() -> Result<Vec<String>, String> {
    if let Ok(raw) = std::env::var("THREADBASE_TEST_PI") {
        let argv: Vec<String> = serde_json::from_str(&raw).map_err(|e| {
            format!("THREADBASE_TEST_PI must be a JSON array of strings: {e}: {raw}")
        })?;
        if argv.is_empty() {
            return Err("THREADBASE_TEST_PI is an empty array".into());
        }
        return Ok(argv);
    }
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/pi");
    let wrapper = tools.join("pi");
    let cli = tools.join("node_modules/@earendil-works/pi-coding-agent/dist/bundle/cli.js");
    let node = tools.join("node_modules/node/bin/node");
    if wrapper.is_file() && cli.is_file() && node.is_file() {
        Ok(vec![wrapper.to_string_lossy().into_owned()])
    } else {
        Err(format!(
            "Pi is not installed ({} missing); run .ci/install-pi or set THREADBASE_TEST_PI to a JSON argv array",
            if !cli.is_file() { cli.display() } else { node.display() }
        ))
    }
}

/// [`find_pi`] for a test: `None` (after printing why) means "skip this test". Under `CI=true`
/// a missing Pi is a failure instead.
pub fn pi_or_skip(test: &str) -> Option<Vec<String>> {
    match find_pi() {
        Ok(argv) => Some(argv),
        Err(why) => {
            super::common::required_or_skip(test, "real Pi", &why);
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Hermetic Pi environment
// ---------------------------------------------------------------------------------------------

/// Name of the environment variable that tags every process of one Pi run (value
/// [`PiEnv::marker`]); [`PiEnv::leftover_processes`] looks for it in `/proc/*/environ`.
pub const MARKER_VAR: &str = "THREADBASE_TEST_MARKER";

/// A temporary HOME and agent dir configured for the fake, and the env and argv to run Pi in RPC
/// mode against it. Everything lives under `root` and is deleted on drop.
pub struct PiEnv {
    pub root: tempfile::TempDir,
    /// `$HOME`.
    pub home: PathBuf,
    /// `$PI_CODING_AGENT_DIR` (`models.json`, `settings.json`).
    pub agent_dir: PathBuf,
    /// An empty working directory (no `.pi/`, no `AGENTS.md`).
    pub cwd: PathBuf,
    /// Unique value of [`MARKER_VAR`] for this environment.
    pub marker: String,
    /// The complete environment of the child (it starts from an empty one).
    pub env: Vec<(String, String)>,
    /// Pi's arguments for RPC mode against the fake, without the argv prefix and without a
    /// session flag (add `--no-session` or `--session <abs path>`).
    pub args: Vec<String>,
}

/// Builds a hermetic Pi environment pointing at `fake` (pi-rpc.md §15): temp HOME and
/// PI_CODING_AGENT_DIR with `models.json` (provider `fake`, api `openai-completions`) and
/// `settings.json` (retries and auto-compaction off, install telemetry off), an environment with
/// no provider keys (it starts empty), and `--offline --provider fake --model fake-model
/// --no-approve` plus the no-discovery flags.
pub fn hermetic_pi_env(fake: &FakeLlm) -> PiEnv {
    let root = tempfile::Builder::new()
        .prefix("threadbase-pi-")
        .tempdir()
        .expect("tempdir");
    let base = root.path().to_path_buf();
    let home = base.join("home");
    let agent_dir = home.join("agent");
    let cwd = base.join("work");
    let tmp = base.join("tmp");
    for d in [&home, &agent_dir, &cwd, &tmp] {
        std::fs::create_dir_all(d).expect("create hermetic dirs");
    }
    let models = json!({
        "providers": {
            PROVIDER: {
                "baseUrl": fake.base_url(),
                "api": "openai-completions",
                "apiKey": API_KEY,
                "compat": {
                    "supportsDeveloperRole": false,
                    "supportsReasoningEffort": false,
                    "supportsStore": false
                },
                "models": [{
                    "id": MODEL, "name": "Fake Model", "reasoning": false, "input": ["text"],
                    "contextWindow": 128000, "maxTokens": 4096
                }]
            }
        }
    });
    let settings = json!({
        "retry": { "enabled": false, "provider": { "maxRetries": 0 } },
        "compaction": { "enabled": false },
        "enableInstallTelemetry": false
    });
    write_json_file(&agent_dir.join("models.json"), &models);
    write_json_file(&agent_dir.join("settings.json"), &settings);

    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let marker = format!(
        "{}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    );
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let env = vec![
        ("PATH".to_string(), path),
        ("HOME".to_string(), s(&home)),
        ("PI_CODING_AGENT_DIR".to_string(), s(&agent_dir)),
        ("PI_OFFLINE".to_string(), "1".to_string()),
        ("PI_SKIP_VERSION_CHECK".to_string(), "1".to_string()),
        ("PI_TELEMETRY".to_string(), "0".to_string()),
        ("TMPDIR".to_string(), s(&tmp)),
        ("LANG".to_string(), "C.UTF-8".to_string()),
        (MARKER_VAR.to_string(), marker.clone()),
    ];
    let args = [
        "--mode",
        "rpc",
        "--offline",
        "--provider",
        PROVIDER,
        "--model",
        MODEL,
        "--no-approve",
        "--no-extensions",
        "--no-skills",
        "--no-prompt-templates",
        "--no-themes",
        "--no-context-files",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    PiEnv {
        root,
        home,
        agent_dir,
        cwd,
        marker,
        env,
        args,
    }
}

fn write_json_file(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap())
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// SIGKILLs every process carrying the env's marker when dropped (the end of a test, also
/// after a failure).
pub struct Reaper<'a>(pub &'a PiEnv);

impl Drop for Reaper<'_> {
    fn drop(&mut self) {
        for pid in self.0.leftover_processes() {
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

impl PiEnv {
    /// Gives the fake model prices (USD per million tokens), so Pi reports a `cost` for every
    /// message: `rates / 1e6 * tokens` per kind, `total` their sum.
    pub fn set_model_cost(&self, input: f64, output: f64, cache_read: f64, cache_write: f64) {
        let path = self.agent_dir.join("models.json");
        let mut models: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        models["providers"][PROVIDER]["models"][0]["cost"] = json!({
            "input": input, "output": output, "cacheRead": cache_read, "cacheWrite": cache_write
        });
        write_json_file(&path, &models);
    }

    /// The argv prefix a `serve` launches children with (`THREADBASE_PI_COMMAND`): Pi plus the
    /// hermetic flags, minus the ones serve manages itself (`--mode`, `--no-approve`), plus
    /// `extra`.
    pub fn child_command(&self, pi: &[String], extra: &[&str]) -> Vec<String> {
        let mut argv: Vec<String> = pi.to_vec();
        let mut skip = false;
        for a in &self.args {
            if skip {
                skip = false;
                continue;
            }
            match a.as_str() {
                "--mode" => skip = true,
                "--no-approve" => {}
                _ => argv.push(a.clone()),
            }
        }
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv
    }

    /// `pi` + [`PiEnv::args`] + `extra`.
    pub fn argv(&self, pi: &[String], extra: &[&str]) -> Vec<String> {
        pi.iter()
            .cloned()
            .chain(self.args.iter().cloned())
            .chain(extra.iter().map(|s| s.to_string()))
            .collect()
    }

    /// A command for [`PiEnv::argv`] with a cleared environment set to [`PiEnv::env`], cwd
    /// [`PiEnv::cwd`], piped stdio, in a new process group whose id is the child's pid.
    pub fn command(&self, pi: &[String], extra: &[&str]) -> Command {
        use std::os::unix::process::CommandExt;
        let argv = self.argv(pi, extra);
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        cmd
    }

    /// Waits up to `timeout` for every process of this env to end; returns those still alive.
    pub fn leftovers_after(&self, timeout: Duration) -> Vec<u32> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = self.leftover_processes();
            if left.is_empty() || Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Pids of live (non-zombie) processes whose environment carries this env's marker: every
    /// process Pi or its tools started, whatever process group or session they moved to.
    pub fn leftover_processes(&self) -> Vec<u32> {
        let needle = format!("{MARKER_VAR}={}", self.marker);
        let mut found = Vec::new();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return found;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
                continue;
            };
            if !environ.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
                continue;
            }
            let zombie = std::fs::read_to_string(entry.path().join("stat"))
                .ok()
                .and_then(|stat| {
                    stat.rsplit_once(')')
                        .map(|(_, rest)| rest.trim_start().starts_with('Z'))
                })
                .unwrap_or(false);
            if !zombie {
                found.push(pid);
            }
        }
        found
    }
}
