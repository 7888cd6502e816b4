//! `threadbase scripted-agent --script FILE [PI FLAGS…]`: a stand-in for `pi --mode rpc` (Pi 1.6
//! dialect) that follows a JSON script instead of calling an LLM. The runtime supervises it exactly
//! like real Pi: same framing, commands, responses, event shapes and order, extension UI
//! sub-protocol, idle/busy signals, session file and exit behaviour (see `reference/pi-rpc.md`).
//! It exists for fast deterministic tests and for `threadbase demo`.
//!
//! # Process model
//!
//! [`run`] reads JSON lines from stdin and writes JSON lines to stdout. A reader (the calling
//! thread) answers commands at once, concurrently with a running agent run, which a worker thread
//! plays from the script; both write stdout through one lock, one whole line at a time. Stdin EOF
//! makes [`run`] return `Ok(())` (the caller exits 0, like Pi); output of a run still in flight is
//! suppressed from that moment. Startup failures that Pi reports with exit 1 and nothing on stdout
//! (unknown flag, `@file` argument, `--fork` with `--session`, a resumed session whose stored cwd
//! is gone, an unreadable session file) are reproduced the same way: a message on stderr and
//! `exit(1)` from inside [`run`]. A script that cannot be read or parsed is an `Err`.
//!
//! SIGTERM exits 143 and SIGHUP exits 129 (Pi's graceful shutdown); SIGINT keeps the default
//! action. The handlers use tokio's signal support (already a dependency of the crate) on one small
//! helper thread; nothing else uses tokio.
//!
//! # Command line
//!
//! Everything after `--script FILE` is parsed like Pi 1.6 parses its flags (`reference/pi-rpc.md`
//! §13). `--mode rpc` is required (real Pi without it would start its TUI). Honoured:
//! `--session <path>` (absolute, or relative containing `/`, or ending in `.jsonl`),
//! `--session-id <id>`, `--no-session`, `--name <name>`, `--provider <p>`, `--model <[p/]id[:level]>`,
//! `--thinking <level>`. Accepted and ignored: every other Pi flag (`--approve`, `--no-approve`,
//! `--models`, `--tools`, `--exclude-tools`, `--no-tools`, `--offline`, `-e`, `--no-extensions`, …).
//! An unknown option fails with `Error: Unknown option: X`, exit 1. Without `--session` and
//! without `--no-session` the session is kept in memory only (real Pi would pick a file under its
//! agent dir; the scripted agent never writes there) and `get_state` has no `sessionFile`.
//!
//! # Script format
//!
//! The script is one JSON object; every field is optional and unknown fields are refused.
//!
//! ```json
//! {
//!   "startup_delay_ms": 0,
//!   "preflight_ms": 5,
//!   "startup_stderr": "text written to stderr at start",
//!   "startup_exit": 1,
//!   "reject_prompts": false,
//!   "ignore_abort": false,
//!   "ignore_sigterm": false,
//!   "spawn_grandchild": false,
//!   "session_id": "ses_0123",
//!   "system_message": true,
//!   "default_reply": "done: {prompt}",
//!   "provider": "scripted",
//!   "model": "scripted-model",
//!   "turns": [
//!     [ {"text": "Let me look.", "deltas": 3}, {"tool": "bash", "args": {"command": "ls"}, "result": "a\nb\n"},
//!       {"text": "Found two files."} ],
//!     "plain string: the same as [{\"text\": …}]",
//!     {"steps": [ {"delay_ms": 200}, {"error": "500: {\"error\":\"boom\"}"} ]}
//!   ]
//! }
//! ```
//!
//! Top-level options:
//!
//! | field | meaning |
//! |---|---|
//! | `startup_delay_ms` | sleep before reading stdin (real Pi answers its first command ~0.8 s after start); commands sent meanwhile wait in the pipe |
//! | `preflight_ms` | how long a `prompt`'s preflight takes before its run starts and it is answered (default 5; Pi's input hooks and auth check); a `prompt` read meanwhile overlaps it, see below |
//! | `startup_stderr` | text written to stderr at start (before the delay) |
//! | `startup_exit` | exit with this code right after `startup_stderr`, printing nothing on stdout (a Pi startup failure) |
//! | `reject_prompts` | `true` or an error text: every `prompt` that would start a run fails its preflight (`success:false`; default text `No API key found for <provider>.`) |
//! | `ignore_abort` | `abort` does not stop the run; its response comes when the run ends by itself (for SIGTERM/SIGKILL escalation tests) |
//! | `ignore_sigterm` | SIGTERM is logged on stderr and otherwise ignored (default: exit 143) |
//! | `spawn_grandchild` | `true` spawns `sleep 1000`, or an argv array spawns that command, at start, in the agent's process group with null stdio, and is not waited for; stderr gets `scripted-agent: grandchild pid N` |
//! | `session_id` | id of a new session (an existing session file keeps its header id; `--session-id` wins over this) |
//! | `system_message` | default `true`: like 1.6, emit and store a `role:"system"` message before a user message when the context (the messages on the leaf's path) has none yet; a resumed session that has one gets no other |
//! | `default_reply` | the answer when the script has nothing left for the model to say; default `done: {prompt}` |
//! | `provider`, `model` | defaults for the model identity when `--provider`/`--model` are absent: `scripted` / `scripted-model` |
//! | `turns` | the list of script turns, see below |
//!
//! **Turns.** A script turn is the model's whole reaction to new user input. One turn is consumed,
//! in order, each time user input reaches the model: the `prompt` (or idle `steer`/`follow_up`)
//! that starts a run, each steering message batch delivered at a turn boundary, and each follow-up
//! batch delivered when the run would otherwise stop. When the list is exhausted, the answer is
//! `default_reply`. A turn is an array of steps, `{"steps": [...]}`, or a plain string (one text
//! step). A steering message delivered at a turn boundary drops the steps left in the current turn
//! (the model now answers the new input), and the next turn is played for it.
//!
//! **Steps.** Text in `text` steps may use `{prompt}` (the text of the user message that consumed
//! this turn), `{ui}` (the last dialog answer: the value, `true`/`false` for confirm, `cancelled`)
//! and `{session_id}`.
//!
//! | step | effect |
//! |---|---|
//! | `{"text": "…", "deltas": N, "thinking": "…", "delay_ms": N, "delta_delay_ms": N}` | an assistant message: `message_start`, optional thinking block (`thinking_start/delta/end`), the text as `text_start`, N `text_delta`s (default 1), `text_end`, `message_end`; `delay_ms` is latency before the message starts, `delta_delay_ms` the pause after each delta |
//! | `{"tool": "bash", "args": {…}, "result": "…", "is_error": false, "updates": N, "duration_ms": N, "details": {…}, "id": "call_1"}` | a tool call. Consecutive `text`/`tool` steps form one assistant message (at most one text, first); tool calls end it with `stopReason:"toolUse"` and are then executed in order: `tool_execution_start`, N `tool_execution_update`s (default 1, cumulative slices of `result`), `tool_execution_end` (after `duration_ms`), `message_start/end` of the `toolResult`, then `turn_end` and a new `turn_start` for the model's next message |
//! | `{"error": "message"}` | an assistant message `{"content":[],"stopReason":"error","errorMessage":…}`; the run ends (`turn_end`, `agent_end`, `agent_settled`); queued messages stay queued, like Pi |
//! | `{"delay_ms": N}` | a pause (model latency, or hook work when it follows the last message) |
//! | `{"ui": "select"\|"confirm"\|"input"\|"editor", "title": "…", …}` | an `extension_ui_request` with a fresh id; the other fields are copied as given (`options`, `message`, `placeholder`, `prefill`, `timeout`); `select` gets `options` `["Yes","No"]` if none. The script waits for the matching `extension_ui_response` (or `timeout` ms, or an abort: then the answer is `cancelled`) |
//! | `{"ui": "notify"\|"setStatus"\|"setWidget"\|"setTitle"\|"set_editor_text", …}` | a fire-and-forget `extension_ui_request`, fields copied as given (`notify` turns a lone `title` into `message`) |
//! | `{"custom_entry": "type", "data": …}` | appends a `custom` session entry and emits `entry_appended` (what an extension's `pi.appendEntry` does) |
//! | `{"stderr": "text"}` | writes the text (plus a newline if missing) to stderr |
//! | `{"exit": code}` | exits at once with that code (stdout flushed, no further events) |
//! | `{"crash": true}` | kills itself with SIGKILL at once (`"crash": "abort"` uses `abort()`, SIGABRT) |
//!
//! Placement: steps before a message run as model latency after `turn_start`; steps after the last
//! message of a turn that made no tool call run before its `turn_end` (so `[{"text":"hi"},
//! {"exit":3}]` dies between `message_end` and `turn_end`). If a turn's steps run out while the
//! model owes a reply (at the start, or after tool results) the reply is `default_reply`. A
//! text-only message that is not the turn's last message is followed by `turn_end`/`turn_start`
//! and the next message, which real Pi would only do after a steering message.
//!
//! # Pi behaviour modelled
//!
//! - Framing: JSON Lines, LF only, trailing `\r` dropped, blank lines skipped; U+2028/2029 kept.
//!   Responses `{"id","type":"response","command","success","data"|"error"}`, `id` echoed when
//!   given (also for unknown commands), `data` left out when there is none. Bad JSON gives
//!   `{"type":"response","command":"parse","success":false,"error":"Failed to parse command: …"}`;
//!   an unknown type gives `Unknown command: <type>`.
//! - `prompt`/`steer`/`follow_up` answer `data.disposition`: `started` (response written before
//!   `agent_start`, and `isStreaming` already true) or `queued`. A `prompt` to an idle agent is
//!   answered after its preflight (`preflight_ms`), and like Pi 1.6, which checks whether it is
//!   busy only after that asynchronous preflight, a `prompt` read while another one's preflight
//!   runs (lines that waited in the pipe during startup, two written back to back) is answered
//!   `started` too, right after it, and never runs: `agent_settled` follows the run's
//!   `agent_start` once per dropped prompt, and `isStreaming` reads false for the rest of that
//!   run (a `prompt` then is dropped the same way). Verified with real Pi. `prompt` while busy needs
//!   `streamingBehavior` (`steer`/`followUp`), else fails with Pi's text. `queue_update
//!   {steering, followUp}` is emitted when a message is queued (before its response), when
//!   `clear_queue` empties the queues, and as each queued message is delivered (after
//!   `turn_start`, just before its user `message_start`, like Pi's session queue);
//!   `pendingMessageCount` counts both queues. A message queued while the run is finishing is
//!   still delivered in that run, never left behind an idle agent. Steering is
//!   checked at run start and after every `turn_end`, follow-ups when the run would stop; both
//!   honour `set_steering_mode`/`set_follow_up_mode` (default `one-at-a-time`). One run, one
//!   `agent_end`, then `agent_settled {aborted}`.
//! - Event order and shapes of §5: `agent_start`, `turn_start`, (system), user `message_start/end`,
//!   assistant `message_start`, delta-only `message_update`s, `message_end`,
//!   `tool_execution_start/update/end` (`durationMs`), `toolResult` messages, `turn_end
//!   {message, toolResults}`, `agent_end {messages, willRetry:false}`, `agent_settled`.
//! - `abort` stops the run promptly wherever it is: a streaming message ends with what was streamed
//!   and `stopReason:"aborted"`, `errorMessage:"Request was aborted"`; a running tool ends with
//!   `isError:true` "Operation aborted", then an empty aborted assistant message follows in a new
//!   turn, as Pi's loop does; an open dialog resolves as cancelled. `agent_end` and
//!   `agent_settled {aborted:true}` come before the `abort` response. Queues are kept.
//! - `get_state` is answered at once, also mid-run: `model`, `thinkingLevel`, `isStreaming`,
//!   `isCompacting:false`, `steeringMode`, `followUpMode`, `sessionFile?`, `sessionId`,
//!   `sessionName?`, `autoCompactionEnabled`, `messageCount`, `pendingMessageCount`.
//! - Also answered: `get_messages`, `get_last_assistant_text`, `get_session_stats`,
//!   `get_fork_messages`, `get_entries {since}` (entries after `since` in file order; all entries
//!   when `since` is absent or unknown), `get_tree`, `get_commands` (empty), `clear_queue`,
//!   `set_session_name` (+ `session_info_changed`), `set_thinking_level` (+
//!   `thinking_level_changed`), `cycle_thinking_level`, `get_available_thinking_levels`,
//!   `set_model`/`get_available_models`/`cycle_model` (one model), `set_steering_mode`,
//!   `set_follow_up_mode`, `set_auto_compaction`, `set_auto_retry`, `abort_retry`, `abort_bash`,
//!   and `bash` (really runs `bash -c` in the session cwd; records a `bashExecution` message).
//!   `extension_ui_response` is never answered; an unknown id is ignored.
//! - Session file (version 3, §10–11): a missing file is created at exactly that path (parents
//!   too) with exclusive create, lazily, when the first user or assistant message exists; buffered
//!   entries are `model_change`, `thinking_level_change`, `session_info` (for `--name`), the system
//!   message, then messages. An existing file is kept as written (host-written headers with any
//!   `id`/`parentSession` included): the header id becomes the session id, its `cwd` the session
//!   cwd (exit 1 if the directory is gone), the last entry in file order is the leaf, messages on
//!   the leaf's path are the context, and new entries are appended with 8-hex ids chained by
//!   `parentId` (`session_info` for `--name`, `thinking_level_change`/`model_change` only if the
//!   path has none).
//!
//! # Not modelled
//!
//! Real model calls and real tools (tool results are scripted; only the RPC `bash` command runs
//! for real); auto-retry and auto-compaction (never triggered, `willRetry` is always false);
//! `compact`, `new_session`, `switch_session`, `fork`, `clone` and `export_html` answer
//! `success:false` (`… is not supported by the scripted agent`); extension loading, extension
//! commands and the `handled` disposition; images are stored but not looked at; `entry_appended` is
//! emitted only for `custom_entry` steps; the exact shape of 1.6's system message `sections` is not
//! recorded in the reference, so the one emitted here is a plausible stand-in; an idle
//! `steer`/`follow_up` starts a run (disposition `started`), which the reference implies but did not
//! verify; steering is only checked between assistant messages (not between the tool calls of one
//! message); `--session` with an id prefix, `--continue`, `--resume` and `--fork` are not
//! searched for (a fresh in-memory or given-path session is used).

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::error::{Error, Result};

/// Runs the scripted agent: `script_path` is the JSON script, `argv` the Pi flags that follow it.
/// Returns on stdin EOF; a scripted `exit`/`crash`, a signal or a Pi-style startup failure ends the
/// process from inside.
pub fn run(script_path: &Path, argv: &[String]) -> Result<()> {
    let script = Script::load(script_path)?;
    if let Some(text) = &script.startup_stderr {
        write_stderr(text);
    }
    if let Some(code) = script.startup_exit {
        std::process::exit(code);
    }
    let args = match Args::parse(argv) {
        Ok(a) => a,
        Err(msg) => startup_failure(&msg),
    };
    for w in &args.warnings {
        write_stderr(w);
    }
    let session = match Session::open(&args, &script) {
        Ok(s) => s,
        Err(msg) => startup_failure(&msg),
    };
    let shared = Arc::new(Shared::new(script, args, session));
    shared.install_signal_handlers();
    shared.spawn_grandchild();
    if shared.script.startup_delay_ms > 0 {
        std::thread::sleep(Duration::from_millis(shared.script.startup_delay_ms));
    }
    {
        let sh = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("scripted-agent-worker".into())
            .spawn(move || worker(&sh))
            .map_err(|e| Error::internal(format!("cannot start the worker thread: {e}")))?;
    }
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match input.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        if buf.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        shared.handle_line(&buf);
    }
    shared.shutdown();
    Ok(())
}

fn startup_failure(msg: &str) -> ! {
    write_stderr(msg);
    std::process::exit(1);
}

fn write_stderr(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = err.write_all(b"\n");
    }
    let _ = err.flush();
}

// ---------------------------------------------------------------------------------------------
// Script
// ---------------------------------------------------------------------------------------------

/// How long a prompt's preflight takes by default (Pi 1.6: input hooks and the auth check, a
/// few event-loop turns).
const DEFAULT_PREFLIGHT_MS: u64 = 5;

#[derive(Debug, Clone)]
struct Script {
    startup_delay_ms: u64,
    preflight_ms: u64,
    startup_stderr: Option<String>,
    startup_exit: Option<i32>,
    reject_prompts: Option<String>,
    ignore_abort: bool,
    ignore_sigterm: bool,
    grandchild: Option<Vec<String>>,
    session_id: Option<String>,
    system_message: bool,
    default_reply: String,
    provider: Option<String>,
    model: Option<String>,
    turns: Vec<Vec<Action>>,
}

#[derive(Debug, Clone)]
enum Action {
    Message(Msg),
    Delay(u64),
    Ui(Map<String, Value>),
    Stderr(String),
    Exit(i32),
    Crash { abort: bool },
    CustomEntry { custom_type: String, data: Value },
}

#[derive(Debug, Clone, Default)]
struct Msg {
    thinking: Option<String>,
    text: Option<String>,
    deltas: usize,
    delay_ms: u64,
    delta_delay_ms: u64,
    tools: Vec<ToolSpec>,
    error: Option<String>,
}

#[derive(Debug, Clone)]
struct ToolSpec {
    name: String,
    id: Option<String>,
    args: Value,
    result: String,
    is_error: bool,
    updates: usize,
    duration_ms: u64,
    details: Value,
}

fn bad_script(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "Invalid scripted-agent script {}: {what}. Repair: fix the script; the format is documented in src/scripted_agent.rs.",
        path.display()
    ))
}

impl Script {
    fn load(path: &Path) -> Result<Script> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::io(format!(
                "Cannot read the scripted-agent script {}: {e}. Repair: pass an existing JSON file to --script.",
                path.display()
            ))
        })?;
        let value: Value = serde_json::from_str(&text).map_err(|e| bad_script(path, e))?;
        Script::from_value(&value).map_err(|e| bad_script(path, e))
    }

    fn from_value(value: &Value) -> std::result::Result<Script, String> {
        let obj = value
            .as_object()
            .ok_or("the script must be a JSON object")?;
        let mut s = Script {
            startup_delay_ms: 0,
            preflight_ms: DEFAULT_PREFLIGHT_MS,
            startup_stderr: None,
            startup_exit: None,
            reject_prompts: None,
            ignore_abort: false,
            ignore_sigterm: false,
            grandchild: None,
            session_id: None,
            system_message: true,
            default_reply: "done: {prompt}".into(),
            provider: None,
            model: None,
            turns: Vec::new(),
        };
        for (k, v) in obj {
            match k.as_str() {
                "startup_delay_ms" => s.startup_delay_ms = get_u64(k, v)?,
                "preflight_ms" => s.preflight_ms = get_u64(k, v)?,
                "startup_stderr" => s.startup_stderr = Some(get_str(k, v)?),
                "startup_exit" => s.startup_exit = Some(get_i32(k, v)?),
                "reject_prompts" => {
                    s.reject_prompts = match v {
                        Value::Bool(false) | Value::Null => None,
                        Value::Bool(true) => Some(String::new()),
                        Value::String(t) => Some(t.clone()),
                        _ => return Err("reject_prompts must be a boolean or a string".into()),
                    }
                }
                "ignore_abort" => s.ignore_abort = get_bool(k, v)?,
                "ignore_sigterm" => s.ignore_sigterm = get_bool(k, v)?,
                "spawn_grandchild" => {
                    s.grandchild = match v {
                        Value::Bool(false) | Value::Null => None,
                        Value::Bool(true) => Some(vec!["sleep".into(), "1000".into()]),
                        Value::Array(items) => {
                            let argv = items
                                .iter()
                                .map(|i| i.as_str().map(str::to_string))
                                .collect::<Option<Vec<_>>>()
                                .filter(|a| !a.is_empty())
                                .ok_or("spawn_grandchild must be a boolean or a non-empty array of strings")?;
                            Some(argv)
                        }
                        _ => return Err(
                            "spawn_grandchild must be a boolean or a non-empty array of strings"
                                .into(),
                        ),
                    }
                }
                "session_id" => s.session_id = Some(get_str(k, v)?),
                "system_message" => s.system_message = get_bool(k, v)?,
                "default_reply" => s.default_reply = get_str(k, v)?,
                "provider" => s.provider = Some(get_str(k, v)?),
                "model" => s.model = Some(get_str(k, v)?),
                "turns" => {
                    let turns = v.as_array().ok_or("turns must be an array")?;
                    for (i, t) in turns.iter().enumerate() {
                        s.turns
                            .push(parse_turn(t).map_err(|e| format!("turns[{i}]: {e}"))?);
                    }
                }
                other => return Err(format!("unknown top-level field {other:?}")),
            }
        }
        Ok(s)
    }
}

fn get_u64(k: &str, v: &Value) -> std::result::Result<u64, String> {
    v.as_u64()
        .ok_or_else(|| format!("{k} must be a non-negative integer"))
}
fn get_i32(k: &str, v: &Value) -> std::result::Result<i32, String> {
    v.as_i64()
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| format!("{k} must be an integer"))
}
fn get_bool(k: &str, v: &Value) -> std::result::Result<bool, String> {
    v.as_bool().ok_or_else(|| format!("{k} must be a boolean"))
}
fn get_str(k: &str, v: &Value) -> std::result::Result<String, String> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{k} must be a string"))
}

fn parse_turn(t: &Value) -> std::result::Result<Vec<Action>, String> {
    let steps: Vec<Value> = match t {
        Value::String(s) => vec![json!({ "text": s })],
        Value::Array(a) => a.clone(),
        Value::Object(o) => {
            if let Some(k) = o.keys().find(|k| *k != "steps") {
                return Err(format!(
                    "unknown field {k:?} in a turn object (only \"steps\")"
                ));
            }
            o.get("steps")
                .and_then(Value::as_array)
                .cloned()
                .ok_or("a turn object needs a \"steps\" array")?
        }
        _ => return Err("a turn is an array of steps, {\"steps\": [...]}, or a string".into()),
    };
    let mut actions: Vec<Action> = Vec::new();
    // Whether the last action is a message that a following tool step may join.
    let mut open = false;
    for (i, step) in steps.iter().enumerate() {
        let err = |e: String| format!("step {i}: {e}");
        let obj = step
            .as_object()
            .ok_or_else(|| err("a step must be an object".into()))?;
        let allow = |keys: &[&str]| -> std::result::Result<(), String> {
            match obj.keys().find(|k| !keys.contains(&k.as_str())) {
                Some(k) => Err(err(format!("unexpected field {k:?}"))),
                None => Ok(()),
            }
        };
        if obj.contains_key("text") || obj.contains_key("thinking") {
            allow(&["text", "thinking", "deltas", "delay_ms", "delta_delay_ms"])?;
            let text = match obj.get("text") {
                None => None,
                Some(v) => Some(get_str("text", v).map_err(err)?),
            };
            let thinking = match obj.get("thinking") {
                None => None,
                Some(v) => Some(get_str("thinking", v).map_err(err)?),
            };
            let num = |k: &str| -> std::result::Result<u64, String> {
                obj.get(k).map_or(Ok(0), |v| get_u64(k, v).map_err(err))
            };
            let deltas = obj
                .get("deltas")
                .map_or(Ok(1), |v| get_u64("deltas", v).map_err(err))?
                .clamp(1, 100_000) as usize;
            actions.push(Action::Message(Msg {
                thinking,
                text,
                deltas,
                delay_ms: num("delay_ms")?,
                delta_delay_ms: num("delta_delay_ms")?,
                tools: Vec::new(),
                error: None,
            }));
            open = true;
        } else if obj.contains_key("tool") {
            allow(&[
                "tool",
                "id",
                "args",
                "result",
                "is_error",
                "updates",
                "duration_ms",
                "details",
            ])?;
            let args = obj.get("args").cloned().unwrap_or_else(|| json!({}));
            if !args.is_object() {
                return Err(err("args must be an object".into()));
            }
            let tool = ToolSpec {
                name: get_str("tool", &obj["tool"]).map_err(err)?,
                id: match obj.get("id") {
                    None => None,
                    Some(v) => Some(get_str("id", v).map_err(err)?),
                },
                args,
                result: match obj.get("result") {
                    None => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                },
                is_error: obj
                    .get("is_error")
                    .map_or(Ok(false), |v| get_bool("is_error", v).map_err(err))?,
                updates: obj
                    .get("updates")
                    .map_or(Ok(1), |v| get_u64("updates", v).map_err(err))?
                    .min(100_000) as usize,
                duration_ms: obj
                    .get("duration_ms")
                    .map_or(Ok(0), |v| get_u64("duration_ms", v).map_err(err))?,
                details: obj.get("details").cloned().unwrap_or_else(|| json!({})),
            };
            match actions.last_mut() {
                Some(Action::Message(m)) if open => m.tools.push(tool),
                _ => {
                    actions.push(Action::Message(Msg {
                        deltas: 1,
                        tools: vec![tool],
                        ..Msg::default()
                    }));
                    open = true;
                }
            }
        } else if obj.contains_key("error") {
            allow(&["error", "delay_ms"])?;
            actions.push(Action::Message(Msg {
                error: Some(get_str("error", &obj["error"]).map_err(err)?),
                delay_ms: obj
                    .get("delay_ms")
                    .map_or(Ok(0), |v| get_u64("delay_ms", v).map_err(err))?,
                deltas: 1,
                ..Msg::default()
            }));
            open = false;
        } else if obj.contains_key("ui") {
            let method = get_str("ui", &obj["ui"]).map_err(err)?;
            const METHODS: [&str; 9] = [
                "select",
                "confirm",
                "input",
                "editor",
                "notify",
                "setStatus",
                "setWidget",
                "setTitle",
                "set_editor_text",
            ];
            if !METHODS.contains(&method.as_str()) {
                return Err(err(format!(
                    "unknown ui method {method:?} (one of {})",
                    METHODS.join(", ")
                )));
            }
            if let Some(t) = obj.get("timeout") {
                get_u64("timeout", t).map_err(err)?;
            }
            let mut fields = Map::new();
            fields.insert("method".into(), Value::String(method.clone()));
            for (k, v) in obj {
                if k != "ui" && k != "type" && k != "id" && k != "method" {
                    fields.insert(k.clone(), v.clone());
                }
            }
            if method == "select" && !fields.contains_key("options") {
                fields.insert("options".into(), json!(["Yes", "No"]));
            }
            if method == "notify" && !fields.contains_key("message") {
                if let Some(title) = fields.remove("title") {
                    fields.insert("message".into(), title);
                }
            }
            actions.push(Action::Ui(fields));
            open = false;
        } else if obj.contains_key("stderr") {
            allow(&["stderr"])?;
            actions.push(Action::Stderr(
                get_str("stderr", &obj["stderr"]).map_err(err)?,
            ));
            open = false;
        } else if obj.contains_key("exit") {
            allow(&["exit"])?;
            actions.push(Action::Exit(get_i32("exit", &obj["exit"]).map_err(err)?));
            open = false;
        } else if obj.contains_key("crash") {
            allow(&["crash"])?;
            let abort = match &obj["crash"] {
                Value::Bool(true) => false,
                Value::String(s) if s == "kill" => false,
                Value::String(s) if s == "abort" => true,
                _ => return Err(err("crash must be true, \"kill\" or \"abort\"".into())),
            };
            actions.push(Action::Crash { abort });
            open = false;
        } else if obj.contains_key("custom_entry") {
            allow(&["custom_entry", "data"])?;
            actions.push(Action::CustomEntry {
                custom_type: get_str("custom_entry", &obj["custom_entry"]).map_err(err)?,
                data: obj.get("data").cloned().unwrap_or(Value::Null),
            });
            open = false;
        } else if obj.contains_key("delay_ms") {
            allow(&["delay_ms"])?;
            actions.push(Action::Delay(
                get_u64("delay_ms", &obj["delay_ms"]).map_err(err)?,
            ));
            open = false;
        } else {
            return Err(err(
                "unknown step (expected one of text, tool, error, delay_ms, ui, custom_entry, stderr, exit, crash)"
                    .into(),
            ));
        }
    }
    Ok(actions)
}

// ---------------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Default)]
struct Args {
    session: Option<String>,
    session_id: Option<String>,
    no_session: bool,
    name: Option<String>,
    provider: Option<String>,
    model: Option<String>,
    thinking: Option<String>,
    warnings: Vec<String>,
}

const THINKING_LEVELS: [&str; 7] = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];

impl Args {
    fn parse(argv: &[String]) -> std::result::Result<Args, String> {
        const VALUE_FLAGS: &[&str] = &[
            "--mode",
            "--provider",
            "--model",
            "--models",
            "--thinking",
            "--tools",
            "-t",
            "--exclude-tools",
            "-xt",
            "--extension",
            "-e",
            "--name",
            "-n",
            "--session",
            "--session-id",
            "--session-dir",
            "--fork",
            "--api-key",
            "--system-prompt",
            "--append-system-prompt",
            "--skill",
            "--prompt-template",
            "--theme",
            "--export",
            "--use-theme",
        ];
        const BOOL_FLAGS: &[&str] = &[
            "--no-tools",
            "-nt",
            "--no-builtin-tools",
            "-nbt",
            "--no-extensions",
            "-ne",
            "--no-skills",
            "-ns",
            "--no-prompt-templates",
            "-np",
            "--no-themes",
            "--no-context-files",
            "-nc",
            "--approve",
            "-a",
            "--no-approve",
            "-na",
            "--no-session",
            "--continue",
            "-c",
            "--resume",
            "-r",
            "--offline",
            "--print",
            "-p",
            "--verbose",
            "--no-mcp",
            "--tui-mode",
            "--list-models",
            "--help",
            "-h",
            "--version",
            "-v",
        ];
        let mut a = Args::default();
        let mut mode: Option<String> = None;
        let mut fork = false;
        let mut continue_or_resume = false;
        let mut i = 0;
        while i < argv.len() {
            let raw = &argv[i];
            i += 1;
            if !raw.starts_with('-') || raw == "-" {
                if raw.starts_with('@') {
                    return Err(format!(
                        "Error: @file arguments are not supported in RPC mode: {raw}"
                    ));
                }
                continue; // initial messages: not used in RPC mode
            }
            let (flag, inline) = match raw.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (raw.clone(), None),
            };
            if VALUE_FLAGS.contains(&flag.as_str()) {
                let value = match inline {
                    Some(v) => v,
                    None => {
                        let v = argv
                            .get(i)
                            .cloned()
                            .ok_or_else(|| format!("Error: {flag} requires a value"))?;
                        i += 1;
                        v
                    }
                };
                match flag.as_str() {
                    "--mode" => mode = Some(value),
                    "--provider" => a.provider = Some(value),
                    "--model" => a.model = Some(value),
                    "--thinking" => a.thinking = Some(value),
                    "--name" | "-n" => a.name = Some(value),
                    "--session" => a.session = Some(value),
                    "--session-id" => a.session_id = Some(value),
                    "--fork" => fork = true,
                    _ => {}
                }
            } else if BOOL_FLAGS.contains(&flag.as_str()) {
                match flag.as_str() {
                    "--no-session" => a.no_session = true,
                    "--continue" | "-c" | "--resume" | "-r" => continue_or_resume = true,
                    _ => {}
                }
            } else {
                return Err(format!("Error: Unknown option: {flag}"));
            }
        }
        match mode.as_deref() {
            Some("rpc") => {}
            Some(m @ ("text" | "json")) => {
                return Err(format!(
                    "scripted-agent: only --mode rpc is supported, not --mode {m}"
                ))
            }
            _ => return Err(
                "scripted-agent: --mode rpc is required (real Pi would start its interactive TUI)"
                    .into(),
            ),
        }
        if fork && (a.session.is_some() || continue_or_resume || a.no_session) {
            return Err(
                "Error: --fork cannot be combined with --session, --continue, --resume or --no-session"
                    .into(),
            );
        }
        if a.session_id.is_some() && (a.session.is_some() || continue_or_resume) {
            return Err(
                "Error: --session-id cannot be combined with --session, --continue or --resume"
                    .into(),
            );
        }
        if let Some(id) = &a.session_id {
            let ok = !id.is_empty()
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
                && id.starts_with(|c: char| c.is_ascii_alphanumeric())
                && id.ends_with(|c: char| c.is_ascii_alphanumeric());
            if !ok {
                return Err(format!("Error: Invalid session id: {id}"));
            }
        }
        if a.provider.is_some() && a.model.is_none() {
            return Err("Error: --provider requires --model".into());
        }
        if let Some(t) = &a.thinking {
            if !THINKING_LEVELS.contains(&t.as_str()) {
                a.warnings.push(format!(
                    "Warning: Invalid thinking level \"{t}\". Valid values: {}",
                    THINKING_LEVELS.join(", ")
                ));
                a.thinking = None;
            }
        }
        if let Some(s) = &a.session {
            let is_path = s.contains('/') || s.contains('\\') || s.ends_with(".jsonl");
            if !is_path {
                return Err(format!(
                    "scripted-agent: --session {s} looks like a session id prefix; pass an absolute session file path"
                ));
            }
        }
        Ok(a)
    }
}

// ---------------------------------------------------------------------------------------------
// Session file
// ---------------------------------------------------------------------------------------------

struct Session {
    id: String,
    file: Option<PathBuf>,
    cwd: String,
    name: Option<String>,
    entries: Vec<Value>,
    ids: HashSet<String>,
    leaf: Option<String>,
    /// Messages on the leaf's path: the agent's context.
    messages: Vec<Value>,
    /// Open for appending once the file exists on disk.
    writer: Option<File>,
    /// Lines written before the file exists (lazy creation of a new session).
    pending: Vec<String>,
    /// The file exists but is empty: write it like a new one.
    reuse_empty: bool,
    write_failed: bool,
}

impl Session {
    fn open(args: &Args, script: &Script) -> std::result::Result<Session, String> {
        let process_cwd = std::env::current_dir()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "/".into());
        let file = if args.no_session {
            None
        } else {
            args.session.as_ref().map(|s| {
                let p = PathBuf::from(s);
                if p.is_absolute() {
                    p
                } else {
                    Path::new(&process_cwd).join(p)
                }
            })
        };
        let mut session = Session {
            id: String::new(),
            file: file.clone(),
            cwd: process_cwd,
            name: None,
            entries: Vec::new(),
            ids: HashSet::new(),
            leaf: None,
            messages: Vec::new(),
            writer: None,
            pending: Vec::new(),
            reuse_empty: false,
            write_failed: false,
        };
        let existing = match &file {
            Some(p) => match std::fs::read(p) {
                Ok(bytes) if bytes.iter().any(|b| !b.is_ascii_whitespace()) => Some(bytes),
                Ok(_) => {
                    session.reuse_empty = true;
                    None
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => {
                    return Err(format!(
                        "Error: Cannot read session file {}: {e}",
                        p.display()
                    ))
                }
            },
            None => None,
        };
        if let (Some(bytes), Some(path)) = (existing, &file) {
            session.load(path, &bytes)?;
            let mut f = OpenOptions::new()
                .read(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("Error: Cannot open session file {}: {e}", path.display()))?;
            if !bytes.ends_with(b"\n") {
                let _ = f.seek(SeekFrom::End(0));
                let _ = f.write_all(b"\n");
            }
            session.writer = Some(f);
        } else {
            session.id = args
                .session_id
                .clone()
                .or_else(|| script.session_id.clone())
                .unwrap_or_else(uuid_v7);
            let header = json!({
                "type": "session",
                "version": 3,
                "id": session.id,
                "timestamp": crate::time::now_iso(),
                "cwd": session.cwd,
            });
            session.pending.push(header.to_string());
        }
        Ok(session)
    }

    /// Loads an existing session file: header, entries, leaf and the context on the leaf's path.
    fn load(&mut self, path: &Path, bytes: &[u8]) -> std::result::Result<(), String> {
        let text = String::from_utf8_lossy(bytes);
        let mut lines = text.split('\n').filter(|l| !l.trim().is_empty());
        let header: Value = lines
            .next()
            .and_then(|l| serde_json::from_str(l.trim_end_matches('\r')).ok())
            .filter(|h: &Value| h.get("type").and_then(Value::as_str) == Some("session"))
            .ok_or_else(|| {
                format!(
                    "Error: Invalid session file {}: the first line is not a session header",
                    path.display()
                )
            })?;
        self.id = header
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if let Some(cwd) = header.get("cwd").and_then(Value::as_str) {
            if !Path::new(cwd).is_dir() {
                return Err(format!(
                    "Error: Stored session working directory does not exist: {cwd}"
                ));
            }
            self.cwd = cwd.to_string();
        }
        for line in lines {
            // Pi skips lines it cannot parse.
            let Ok(entry) = serde_json::from_str::<Value>(line.trim_end_matches('\r')) else {
                continue;
            };
            if !entry.is_object() {
                continue;
            }
            if let Some(id) = entry.get("id").and_then(Value::as_str) {
                self.ids.insert(id.to_string());
                self.leaf = Some(id.to_string());
            }
            self.entries.push(entry);
        }
        let path_entries = self.path_to_leaf();
        for e in &path_entries {
            match e.get("type").and_then(Value::as_str) {
                Some("message") => {
                    if let Some(m) = e.get("message") {
                        self.messages.push(m.clone());
                    }
                }
                Some("session_info") => {
                    self.name = e
                        .get("name")
                        .and_then(Value::as_str)
                        .filter(|n| !n.is_empty())
                        .map(str::to_string);
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn path_to_leaf(&self) -> Vec<Value> {
        let by_id: HashMap<&str, &Value> = self
            .entries
            .iter()
            .filter_map(|e| e.get("id").and_then(Value::as_str).map(|id| (id, e)))
            .collect();
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut cur = self.leaf.as_deref();
        while let Some(id) = cur {
            if !seen.insert(id) {
                break;
            }
            let Some(e) = by_id.get(id) else { break };
            out.push((*e).clone());
            cur = e.get("parentId").and_then(Value::as_str);
        }
        out.reverse();
        out
    }

    fn path_has(&self, ty: &str) -> bool {
        self.path_to_leaf()
            .iter()
            .any(|e| e.get("type").and_then(Value::as_str) == Some(ty))
    }

    fn new_entry_id(&mut self) -> String {
        loop {
            let id = crate::ids::random_hex(8);
            if self.ids.insert(id.clone()) {
                return id;
            }
        }
    }

    /// Appends an entry (`fields` without id/parentId/timestamp) as a child of the leaf.
    fn append(&mut self, ty: &str, fields: Map<String, Value>) -> Value {
        let id = self.new_entry_id();
        let mut entry = Map::new();
        entry.insert("type".into(), Value::String(ty.into()));
        entry.insert("id".into(), Value::String(id.clone()));
        entry.insert(
            "parentId".into(),
            self.leaf.clone().map_or(Value::Null, Value::String),
        );
        entry.insert("timestamp".into(), Value::String(crate::time::now_iso()));
        entry.extend(fields);
        let entry = Value::Object(entry);
        self.leaf = Some(id);
        self.entries.push(entry.clone());
        self.persist(&entry);
        entry
    }

    fn append_message(&mut self, message: &Value) -> Value {
        self.messages.push(message.clone());
        let mut f = Map::new();
        f.insert("message".into(), message.clone());
        self.append("message", f)
    }

    fn persist(&mut self, entry: &Value) {
        let Some(path) = self.file.clone() else {
            return;
        };
        if self.write_failed {
            return;
        }
        let line = entry.to_string();
        if self.writer.is_none() {
            self.pending.push(line);
            let role = entry
                .get("message")
                .and_then(|m| m.get("role"))
                .and_then(Value::as_str);
            if matches!(role, Some("user" | "assistant")) {
                self.create_file(&path);
            }
            return;
        }
        self.write_line(&line);
    }

    fn create_file(&mut self, path: &Path) {
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let mut opts = OpenOptions::new();
        if self.reuse_empty {
            opts.write(true).truncate(true);
        } else {
            opts.write(true).create_new(true);
        }
        match opts.open(path) {
            Ok(f) => {
                self.writer = Some(f);
                let lines = std::mem::take(&mut self.pending);
                for l in lines {
                    self.write_line(&l);
                }
            }
            Err(e) => {
                self.write_failed = true;
                write_stderr(&format!(
                    "scripted-agent: cannot create session file {}: {e}",
                    path.display()
                ));
            }
        }
    }

    fn write_line(&mut self, line: &str) {
        if let Some(f) = &mut self.writer {
            let mut buf = Vec::with_capacity(line.len() + 1);
            buf.extend_from_slice(line.as_bytes());
            buf.push(b'\n');
            if let Err(e) = f.write_all(&buf) {
                self.write_failed = true;
                write_stderr(&format!(
                    "scripted-agent: cannot write the session file: {e}"
                ));
            }
        }
    }
}

fn uuid_v7() -> String {
    uuid::Uuid::now_v7().to_string()
}

fn uuid_v4() -> String {
    uuid::Uuid::new_v4().to_string()
}

// ---------------------------------------------------------------------------------------------
// Shared state
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct UserInput {
    text: String,
    images: Vec<Value>,
    /// Taken from a queue (`Some(true)`: follow-up, `Some(false)`: steering).
    queued: Option<bool>,
}

struct State {
    streaming: bool,
    run_request: Option<Vec<UserInput>>,
    abort_requested: bool,
    /// Ids (or absence of one) of `abort` commands waiting for the run to end.
    abort_waiters: Vec<Option<Value>>,
    steering: VecDeque<UserInput>,
    follow_up: VecDeque<UserInput>,
    steering_mode: String,
    follow_up_mode: String,
    auto_compaction: bool,
    pending_ui: HashSet<String>,
    ui_answers: HashMap<String, Value>,
    last_ui: String,
    session: Session,
    provider: String,
    model_id: String,
    thinking_level: String,
    turn_cursor: usize,
    tool_counter: u64,
    response_counter: u64,
    shutdown: bool,
    /// A prompt is in its preflight: it has not started its run nor been answered yet.
    preflight_pending: bool,
    /// Ids of prompts that arrived during that preflight: answered `started` after it, never
    /// run (see [`Shared::cmd_input`]).
    overlapped: Vec<Option<Value>>,
    /// `agent_settled` events owed for dropped prompts, emitted after the run's `agent_start`.
    lost_settles: usize,
    /// A dropped prompt cleared Pi's run flag: `isStreaming` reads false until the run ends.
    streaming_reset: bool,
}

struct Out {
    closed: bool,
}

struct Shared {
    script: Script,
    st: Mutex<State>,
    cv: Condvar,
    out: Mutex<Out>,
}

enum Reply {
    Ok(Option<Value>),
    Err(String),
    /// Answered later by someone else (abort waiting for the run to end).
    Deferred,
    /// Not a command: never answered.
    None,
}

impl Shared {
    fn new(script: Script, args: Args, mut session: Session) -> Shared {
        let (mut provider, mut model_id) = (
            script.provider.clone().unwrap_or_else(|| "scripted".into()),
            script
                .model
                .clone()
                .unwrap_or_else(|| "scripted-model".into()),
        );
        let mut thinking = args.thinking.clone();
        if let Some(m) = &args.model {
            let mut m = m.clone();
            if let Some((base, level)) = m.rsplit_once(':') {
                if THINKING_LEVELS.contains(&level) {
                    if thinking.is_none() {
                        thinking = Some(level.to_string());
                    }
                    m = base.to_string();
                }
            }
            match (&args.provider, m.split_once('/')) {
                (Some(p), _) => {
                    provider = p.clone();
                    model_id = m;
                }
                (None, Some((p, id))) => {
                    provider = p.to_string();
                    model_id = id.to_string();
                }
                (None, None) => model_id = m,
            }
        }
        let thinking_level = thinking.unwrap_or_else(|| "off".into());
        // Entries Pi writes when it opens the session.
        let resumed = !session.entries.is_empty() || session.writer.is_some();
        if !resumed || !(session.path_has("model_change") || session_has_assistant(&session)) {
            let mut f = Map::new();
            f.insert("provider".into(), Value::String(provider.clone()));
            f.insert("modelId".into(), Value::String(model_id.clone()));
            session.append("model_change", f);
        }
        if !resumed || !session.path_has("thinking_level_change") {
            let mut f = Map::new();
            f.insert(
                "thinkingLevel".into(),
                Value::String(thinking_level.clone()),
            );
            session.append("thinking_level_change", f);
        }
        if let Some(name) = args.name.as_ref().filter(|n| !n.trim().is_empty()) {
            let mut f = Map::new();
            f.insert("name".into(), Value::String(name.trim().to_string()));
            session.append("session_info", f);
            session.name = Some(name.trim().to_string());
        }
        Shared {
            st: Mutex::new(State {
                streaming: false,
                run_request: None,
                abort_requested: false,
                abort_waiters: Vec::new(),
                steering: VecDeque::new(),
                follow_up: VecDeque::new(),
                steering_mode: "one-at-a-time".into(),
                follow_up_mode: "one-at-a-time".into(),
                auto_compaction: true,
                pending_ui: HashSet::new(),
                ui_answers: HashMap::new(),
                last_ui: String::new(),
                session,
                provider,
                model_id,
                thinking_level,
                turn_cursor: 0,
                tool_counter: 0,
                response_counter: 0,
                shutdown: false,
                preflight_pending: false,
                overlapped: Vec::new(),
                lost_settles: 0,
                streaming_reset: false,
            }),
            cv: Condvar::new(),
            out: Mutex::new(Out { closed: false }),
            script,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_out(&self) -> MutexGuard<'_, Out> {
        self.out.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes one JSON line to stdout, atomically with respect to every other writer.
    fn emit(&self, value: &Value) {
        let mut out = self.lock_out();
        if out.closed {
            return;
        }
        let mut line = value.to_string();
        line.push('\n');
        let mut stdout = std::io::stdout().lock();
        if stdout
            .write_all(line.as_bytes())
            .and_then(|_| stdout.flush())
            .is_err()
        {
            out.closed = true;
        }
    }

    fn shutdown(&self) {
        let mut st = self.lock();
        st.shutdown = true;
        st.session.write_failed = true; // no more session writes from a run still in flight
        self.lock_out().closed = true;
        drop(st);
        self.cv.notify_all();
    }

    /// Ends the process with `code` once no line is half written.
    fn exit_now(&self, code: i32) -> ! {
        let deadline = Instant::now() + Duration::from_secs(1);
        let guard = loop {
            match self.out.try_lock() {
                Ok(g) => break Some(g),
                Err(std::sync::TryLockError::Poisoned(p)) => break Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(_) => break None,
            }
        };
        let _ = std::io::stdout().flush();
        let _held = guard; // never released: nobody writes after this point
        std::process::exit(code);
    }

    fn install_signal_handlers(self: &Arc<Self>) {
        let sh = Arc::clone(self);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("scripted-agent-signals".into())
            .spawn(move || {
                use tokio::signal::unix::{signal, SignalKind};
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    let _ = tx.send(());
                    return;
                };
                rt.block_on(async move {
                    let term = signal(SignalKind::terminate());
                    let hup = signal(SignalKind::hangup());
                    let _ = tx.send(());
                    let (Ok(mut term), Ok(mut hup)) = (term, hup) else {
                        return;
                    };
                    loop {
                        tokio::select! {
                            _ = term.recv() => {
                                if sh.script.ignore_sigterm {
                                    write_stderr("scripted-agent: ignoring SIGTERM (ignore_sigterm)");
                                } else {
                                    sh.exit_now(143);
                                }
                            }
                            _ = hup.recv() => sh.exit_now(129),
                        }
                    }
                });
            });
        if spawned.is_ok() {
            // Wait until the handlers are in place, so an early SIGTERM is not the default action.
            let _ = rx.recv_timeout(Duration::from_secs(5));
        }
    }

    fn spawn_grandchild(&self) {
        let Some(argv) = &self.script.grandchild else {
            return;
        };
        let spawned = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        match spawned {
            Ok(child) => {
                write_stderr(&format!("scripted-agent: grandchild pid {}", child.id()));
                // Not waited for, like processes spawned by Pi's extensions.
                std::mem::forget(child);
            }
            Err(e) => write_stderr(&format!(
                "scripted-agent: cannot spawn grandchild {:?}: {e}",
                argv
            )),
        }
    }

    fn aborting(&self, st: &State) -> bool {
        st.shutdown || (st.abort_requested && !self.script.ignore_abort)
    }

    /// Waits up to `ms`; true if the run was aborted meanwhile.
    fn wait_ms(&self, ms: u64) -> bool {
        let deadline = Instant::now() + Duration::from_millis(ms);
        let mut st = self.lock();
        loop {
            if self.aborting(&st) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            st = self
                .cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn model_json(&self, st: &State) -> Value {
        json!({
            "id": st.model_id,
            "name": st.model_id,
            "api": "openai-completions",
            "provider": st.provider,
            "baseUrl": "http://127.0.0.1/scripted-agent",
            "reasoning": true,
            "input": ["text", "image"],
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
            "contextWindow": 128000,
            "maxTokens": 16384,
        })
    }

    // -----------------------------------------------------------------------------------------
    // Commands
    // -----------------------------------------------------------------------------------------

    fn handle_line(self: &Arc<Self>, line: &[u8]) {
        let cmd: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                self.emit(&json!({
                    "type": "response",
                    "command": "parse",
                    "success": false,
                    "error": format!("Failed to parse command: {e}"),
                }));
                return;
            }
        };
        let id = cmd.get("id").cloned();
        let ty = cmd.get("type").and_then(Value::as_str).map(str::to_string);
        let command_name = ty.clone().unwrap_or_else(|| "undefined".into());
        let reply = self.dispatch(ty.as_deref().unwrap_or(""), &cmd, id.as_ref());
        match reply {
            Reply::Ok(data) => self.respond(id.as_ref(), &command_name, Ok(data)),
            Reply::Err(e) => self.respond(id.as_ref(), &command_name, Err(e)),
            Reply::Deferred | Reply::None => {}
        }
    }

    fn respond(
        &self,
        id: Option<&Value>,
        command: &str,
        result: std::result::Result<Option<Value>, String>,
    ) {
        self.emit(&response(id, command, result));
    }

    fn dispatch(self: &Arc<Self>, ty: &str, cmd: &Value, id: Option<&Value>) -> Reply {
        let str_field = |k: &str| cmd.get(k).and_then(Value::as_str).map(str::to_string);
        match ty {
            "prompt" | "steer" | "follow_up" => self.cmd_input(ty, cmd),
            "abort" => {
                let mut st = self.lock();
                if !st.streaming {
                    return Reply::Ok(None);
                }
                st.abort_waiters.push(id.cloned());
                st.abort_requested = true;
                drop(st);
                self.cv.notify_all();
                Reply::Deferred
            }
            "extension_ui_response" => {
                if let Some(ui_id) = cmd.get("id").and_then(Value::as_str) {
                    let mut st = self.lock();
                    if st.pending_ui.remove(ui_id) {
                        st.ui_answers.insert(ui_id.to_string(), cmd.clone());
                        drop(st);
                        self.cv.notify_all();
                    }
                }
                Reply::None
            }
            "get_state" => {
                let st = self.lock();
                let mut d = Map::new();
                d.insert("model".into(), self.model_json(&st));
                d.insert("thinkingLevel".into(), json!(st.thinking_level));
                d.insert(
                    "isStreaming".into(),
                    json!(st.streaming && !st.streaming_reset),
                );
                d.insert("isCompacting".into(), json!(false));
                d.insert("steeringMode".into(), json!(st.steering_mode));
                d.insert("followUpMode".into(), json!(st.follow_up_mode));
                if let Some(f) = &st.session.file {
                    d.insert("sessionFile".into(), json!(f.to_string_lossy()));
                }
                d.insert("sessionId".into(), json!(st.session.id));
                if let Some(n) = &st.session.name {
                    d.insert("sessionName".into(), json!(n));
                }
                d.insert("autoCompactionEnabled".into(), json!(st.auto_compaction));
                d.insert("messageCount".into(), json!(st.session.messages.len()));
                d.insert(
                    "pendingMessageCount".into(),
                    json!(st.steering.len() + st.follow_up.len()),
                );
                // Written while the state is still locked, as Pi builds and writes its answer in
                // one go: a "streaming" answer can never follow the run's agent_settled.
                self.respond(id, "get_state", Ok(Some(Value::Object(d))));
                drop(st);
                Reply::None
            }
            "get_messages" => {
                let st = self.lock();
                Reply::Ok(Some(json!({ "messages": st.session.messages })))
            }
            "get_last_assistant_text" => {
                let st = self.lock();
                let text = st
                    .session
                    .messages
                    .iter()
                    .rev()
                    .find(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
                    .map(|m| text_of(m, "text"));
                Reply::Ok(Some(json!({ "text": text })))
            }
            "get_session_stats" => Reply::Ok(Some(self.session_stats())),
            "get_fork_messages" => {
                let st = self.lock();
                let messages: Vec<Value> = st
                    .session
                    .path_to_leaf()
                    .iter()
                    .filter(|e| {
                        e.get("type").and_then(Value::as_str) == Some("message")
                            && e.pointer("/message/role").and_then(Value::as_str) == Some("user")
                    })
                    .map(|e| json!({ "entryId": e["id"], "text": text_of(&e["message"], "text") }))
                    .collect();
                Reply::Ok(Some(json!({ "messages": messages })))
            }
            "get_entries" => {
                let st = self.lock();
                let entries = &st.session.entries;
                let start = str_field("since")
                    .and_then(|since| {
                        entries
                            .iter()
                            .position(|e| e.get("id").and_then(Value::as_str) == Some(&since))
                    })
                    .map_or(0, |i| i + 1);
                Reply::Ok(Some(json!({
                    "entries": entries[start..],
                    "leafId": st.session.leaf,
                })))
            }
            "get_tree" => {
                let st = self.lock();
                Reply::Ok(Some(json!({
                    "tree": build_tree(&st.session.entries),
                    "leafId": st.session.leaf,
                })))
            }
            "get_commands" => Reply::Ok(Some(json!({ "commands": [] }))),
            "clear_queue" => {
                let mut st = self.lock();
                let steering: Vec<String> = st.steering.drain(..).map(|u| u.text).collect();
                let follow_up: Vec<String> = st.follow_up.drain(..).map(|u| u.text).collect();
                self.emit_queue_update(&st, &[]);
                Reply::Ok(Some(json!({ "steering": steering, "followUp": follow_up })))
            }
            "set_session_name" => {
                let name = str_field("name").unwrap_or_default();
                let name = name.trim();
                if name.is_empty() {
                    return Reply::Err("Session name cannot be empty".into());
                }
                let mut st = self.lock();
                let mut f = Map::new();
                f.insert("name".into(), json!(name));
                st.session.append("session_info", f);
                st.session.name = Some(name.to_string());
                self.emit(&json!({ "type": "session_info_changed", "name": name }));
                Reply::Ok(None)
            }
            "set_thinking_level" => {
                let Some(level) =
                    str_field("level").filter(|l| THINKING_LEVELS.contains(&l.as_str()))
                else {
                    return Reply::Err(format!(
                        "Invalid thinking level. Valid values: {}",
                        THINKING_LEVELS.join(", ")
                    ));
                };
                let mut st = self.lock();
                self.set_thinking(&mut st, &level);
                Reply::Ok(None)
            }
            "cycle_thinking_level" => {
                let mut st = self.lock();
                let levels = &THINKING_LEVELS[..6];
                let i = levels
                    .iter()
                    .position(|l| *l == st.thinking_level)
                    .map_or(0, |i| (i + 1) % levels.len());
                self.set_thinking(&mut st, levels[i]);
                Reply::Ok(Some(json!({ "level": levels[i] })))
            }
            "get_available_thinking_levels" => {
                Reply::Ok(Some(json!({ "levels": &THINKING_LEVELS[..6] })))
            }
            "set_model" => {
                let st = self.lock();
                let (p, m) = (str_field("provider"), str_field("modelId"));
                if p.as_deref() != Some(st.provider.as_str())
                    || m.as_deref() != Some(st.model_id.as_str())
                {
                    return Reply::Err(format!(
                        "Model not found: {}/{}",
                        p.unwrap_or_else(|| "undefined".into()),
                        m.unwrap_or_else(|| "undefined".into())
                    ));
                }
                let mut st = st;
                let mut f = Map::new();
                f.insert("provider".into(), json!(st.provider));
                f.insert("modelId".into(), json!(st.model_id));
                st.session.append("model_change", f);
                Reply::Ok(Some(self.model_json(&st)))
            }
            "get_available_models" => {
                let st = self.lock();
                Reply::Ok(Some(json!({ "models": [self.model_json(&st)] })))
            }
            "cycle_model" => Reply::Ok(Some(Value::Null)),
            "set_steering_mode" | "set_follow_up_mode" => {
                let Some(mode) = str_field("mode").filter(|m| m == "all" || m == "one-at-a-time")
                else {
                    return Reply::Err(
                        "Invalid mode: expected \"all\" or \"one-at-a-time\"".into(),
                    );
                };
                let mut st = self.lock();
                if ty == "set_steering_mode" {
                    st.steering_mode = mode;
                } else {
                    st.follow_up_mode = mode;
                }
                Reply::Ok(None)
            }
            "set_auto_compaction" => {
                let mut st = self.lock();
                st.auto_compaction = cmd.get("enabled").and_then(Value::as_bool).unwrap_or(true);
                Reply::Ok(None)
            }
            "set_auto_retry" | "abort_retry" | "abort_bash" => Reply::Ok(None),
            "bash" => self.cmd_bash(cmd, id),
            "compact" | "new_session" | "switch_session" | "fork" | "clone" | "export_html" => {
                Reply::Err(format!("{ty} is not supported by the scripted agent"))
            }
            _ => Reply::Err(format!(
                "Unknown command: {}",
                if ty.is_empty() { "undefined" } else { ty }
            )),
        }
    }

    fn set_thinking(&self, st: &mut State, level: &str) {
        if st.thinking_level == level {
            return;
        }
        st.thinking_level = level.to_string();
        let mut f = Map::new();
        f.insert("thinkingLevel".into(), json!(level));
        st.session.append("thinking_level_change", f);
        self.emit(&json!({ "type": "thinking_level_changed", "level": level }));
    }

    fn session_stats(&self) -> Value {
        let st = self.lock();
        let (mut user, mut assistant, mut calls, mut results) = (0, 0, 0, 0);
        let (mut input, mut output) = (0u64, 0u64);
        for m in &st.session.messages {
            match m.get("role").and_then(Value::as_str) {
                Some("user") => user += 1,
                Some("assistant") => {
                    assistant += 1;
                    calls += m.get("content").and_then(Value::as_array).map_or(0, |c| {
                        c.iter()
                            .filter(|b| b.get("type").and_then(Value::as_str) == Some("toolCall"))
                            .count()
                    });
                    input += m
                        .pointer("/usage/input")
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                    output += m
                        .pointer("/usage/output")
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                }
                Some("toolResult") => results += 1,
                _ => {}
            }
        }
        let mut d = Map::new();
        if let Some(f) = &st.session.file {
            d.insert("sessionFile".into(), json!(f.to_string_lossy()));
        }
        d.insert("sessionId".into(), json!(st.session.id));
        d.insert("userMessages".into(), json!(user));
        d.insert("assistantMessages".into(), json!(assistant));
        d.insert("toolCalls".into(), json!(calls));
        d.insert("toolResults".into(), json!(results));
        d.insert("totalMessages".into(), json!(st.session.messages.len()));
        d.insert(
            "tokens".into(),
            json!({"input": input, "output": output, "cacheRead": 0, "cacheWrite": 0, "total": input + output}),
        );
        d.insert("cost".into(), json!(0));
        Value::Object(d)
    }

    fn cmd_input(self: &Arc<Self>, ty: &str, cmd: &Value) -> Reply {
        let Some(text) = cmd.get("message").and_then(Value::as_str) else {
            return Reply::Err(format!("{ty} requires a string \"message\""));
        };
        let input = UserInput {
            text: text.to_string(),
            images: cmd
                .get("images")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            queued: None,
        };
        let mut st = self.lock();
        // Pi 1.6 reads its run flag for a `prompt` only after the preflight (see below).
        let busy = st.streaming && !(ty == "prompt" && st.streaming_reset);
        if busy {
            let follow = match ty {
                "prompt" => match cmd.get("streamingBehavior") {
                    Some(Value::String(s)) if s == "followUp" => true,
                    Some(v) if truthy(v) => false,
                    _ => return Reply::Err(
                        "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
                            .into(),
                    ),
                },
                "follow_up" => true,
                _ => false,
            };
            if follow {
                st.follow_up.push_back(UserInput {
                    queued: Some(true),
                    ..input
                });
            } else {
                st.steering.push_back(UserInput {
                    queued: Some(false),
                    ..input
                });
            }
            self.emit_queue_update(&st, &[]);
            // Written under the lock, so it precedes the delivery of the queued message.
            self.emit(&response(
                cmd.get("id"),
                ty,
                Ok(Some(json!({ "disposition": "queued" }))),
            ));
            return Reply::Deferred;
        }
        if ty == "prompt" {
            if let Some(reason) = &self.script.reject_prompts {
                let reason = if reason.is_empty() {
                    format!(
                        "No API key found for {}.\n\nUse /login, set an API key environment variable, or create auth.json",
                        st.provider
                    )
                } else {
                    reason.clone()
                };
                return Reply::Err(reason);
            }
        }
        let id = cmd.get("id").cloned();
        if ty == "prompt" && (st.preflight_pending || st.streaming) {
            // Pi 1.6 checks whether it is busy only after a prompt's asynchronous preflight and
            // marks the run active only when that ends; a prompt that arrives meanwhile (or
            // after a dropped one cleared the flag) also "starts": it is answered `started`,
            // then the agent drops it as already processing, emits `agent_settled` for it and
            // clears the run flag while the first run goes on (verified with real Pi).
            if st.preflight_pending {
                st.overlapped.push(id);
            } else {
                self.emit(&response(
                    id.as_ref(),
                    ty,
                    Ok(Some(json!({ "disposition": "started" }))),
                ));
                self.emit(&json!({ "type": "agent_settled", "aborted": false }));
            }
            return Reply::Deferred;
        }
        if ty == "prompt" && self.script.preflight_ms > 0 {
            st.preflight_pending = true;
            drop(st);
            let sh = Arc::clone(self);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(sh.script.preflight_ms));
                let mut st = sh.lock();
                st.preflight_pending = false;
                if !st.shutdown {
                    sh.start_run(&mut st, "prompt", input, id.as_ref());
                    for other in std::mem::take(&mut st.overlapped) {
                        sh.emit(&response(
                            other.as_ref(),
                            "prompt",
                            Ok(Some(json!({ "disposition": "started" }))),
                        ));
                        st.lost_settles += 1;
                        st.streaming_reset = true;
                    }
                }
                drop(st);
                sh.cv.notify_all();
            });
            return Reply::Deferred;
        }
        self.start_run(&mut st, ty, input, id.as_ref());
        drop(st);
        self.cv.notify_all();
        Reply::Deferred
    }

    /// Hands a run to the worker and answers `started`. The response goes out before the
    /// worker can take the request (it needs the state lock), so it always precedes
    /// `agent_start`.
    fn start_run(&self, st: &mut State, ty: &str, input: UserInput, id: Option<&Value>) {
        st.streaming = true;
        st.run_request = Some(vec![input]);
        self.emit(&response(
            id,
            ty,
            Ok(Some(json!({ "disposition": "started" }))),
        ));
    }

    fn cmd_bash(self: &Arc<Self>, cmd: &Value, id: Option<&Value>) -> Reply {
        let command = cmd
            .get("command")
            .and_then(Value::as_str)
            .map(str::trim)
            .unwrap_or("")
            .to_string();
        if command.is_empty() {
            return Reply::Err("Invalid bash command: command cannot be empty".into());
        }
        let exclude = cmd
            .get("excludeFromContext")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let id = id.cloned();
        let sh = Arc::clone(self);
        std::thread::spawn(move || {
            let cwd = sh.lock().session.cwd.clone();
            let result = std::process::Command::new("bash")
                .arg("-c")
                .arg(format!("{command} 2>&1"))
                .current_dir(&cwd)
                .stdin(std::process::Stdio::null())
                .output();
            let (output, code) = match result {
                Ok(o) => (
                    String::from_utf8_lossy(&o.stdout).into_owned(),
                    o.status.code().map_or(Value::Null, |c| json!(c)),
                ),
                Err(e) => (format!("{e}"), Value::Null),
            };
            let mut msg = Map::new();
            msg.insert("role".into(), json!("bashExecution"));
            msg.insert("command".into(), json!(command));
            msg.insert("output".into(), json!(output));
            msg.insert("exitCode".into(), code.clone());
            msg.insert("cancelled".into(), json!(false));
            msg.insert("truncated".into(), json!(false));
            msg.insert("timestamp".into(), json!(crate::time::now_ms()));
            if exclude {
                msg.insert("excludeFromContext".into(), json!(true));
            }
            let mut st = sh.lock();
            st.session.append_message(&Value::Object(msg));
            sh.emit(&response(
                id.as_ref(),
                "bash",
                Ok(Some(json!({
                    "output": output,
                    "exitCode": code,
                    "cancelled": false,
                    "truncated": false,
                }))),
            ));
        });
        Reply::Deferred
    }

    /// `queue_update` with the queues' contents; `in_flight` are messages already taken off a
    /// queue but not yet delivered (still shown, ahead of their queue, as Pi shows them).
    fn emit_queue_update(&self, st: &State, in_flight: &[UserInput]) {
        let list = |follow: bool, queue: &VecDeque<UserInput>| -> Vec<String> {
            in_flight
                .iter()
                .filter(|u| u.queued == Some(follow))
                .chain(queue.iter())
                .map(|u| u.text.clone())
                .collect()
        };
        self.emit(&json!({
            "type": "queue_update",
            "steering": list(false, &st.steering),
            "followUp": list(true, &st.follow_up),
        }));
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

fn session_has_assistant(s: &Session) -> bool {
    s.messages
        .iter()
        .any(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
}

fn response(
    id: Option<&Value>,
    command: &str,
    result: std::result::Result<Option<Value>, String>,
) -> Value {
    let mut r = Map::new();
    if let Some(id) = id {
        r.insert("id".into(), id.clone());
    }
    r.insert("type".into(), json!("response"));
    r.insert("command".into(), json!(command));
    match result {
        Ok(data) => {
            r.insert("success".into(), json!(true));
            if let Some(d) = data {
                r.insert("data".into(), d);
            }
        }
        Err(e) => {
            r.insert("success".into(), json!(false));
            r.insert("error".into(), json!(e));
        }
    }
    Value::Object(r)
}

/// Concatenated text of the `kind` blocks of a message (`content` may be a string).
fn text_of(message: &Value, kind: &str) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some(kind))
            .filter_map(|b| b.get(kind).and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// `[{entry, children}]` roots in file order, built without recursion.
fn build_tree(entries: &[Value]) -> Vec<Value> {
    let index: HashMap<&str, usize> = entries
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.get("id").and_then(Value::as_str).map(|id| (id, i)))
        .collect();
    let mut children: Vec<VecDeque<Value>> = vec![VecDeque::new(); entries.len()];
    let mut roots = VecDeque::new();
    for i in (0..entries.len()).rev() {
        let node = json!({
            "entry": entries[i],
            "children": Vec::from(std::mem::take(&mut children[i])),
        });
        let parent = entries[i]
            .get("parentId")
            .and_then(Value::as_str)
            .and_then(|p| index.get(p).copied())
            .filter(|&p| p < i);
        match parent {
            Some(p) => children[p].push_front(node),
            None => roots.push_front(node),
        }
    }
    Vec::from(roots)
}

// ---------------------------------------------------------------------------------------------
// The worker: plays runs from the script
// ---------------------------------------------------------------------------------------------

fn worker(sh: &Arc<Shared>) {
    loop {
        let inputs = {
            let mut st = sh.lock();
            loop {
                if st.shutdown {
                    return;
                }
                if let Some(r) = st.run_request.take() {
                    break r;
                }
                st = sh.cv.wait(st).unwrap_or_else(|p| p.into_inner());
            }
        };
        Run::new(sh).play(inputs);
    }
}

/// How an assistant message (and its tool calls) ended.
enum MsgEnd {
    Done {
        assistant: Value,
        results: Vec<Value>,
    },
    /// Aborted or errored: the message itself carries the stop reason.
    Stopped { assistant: Value, aborted: bool },
    /// Aborted while its tools ran.
    ToolsAborted {
        assistant: Value,
        results: Vec<Value>,
    },
}

struct Run<'a> {
    sh: &'a Arc<Shared>,
    /// Messages produced by this run, for `agent_end`.
    produced: Vec<Value>,
    actions: VecDeque<Action>,
    prompt_text: String,
}

impl<'a> Run<'a> {
    fn new(sh: &'a Arc<Shared>) -> Self {
        Run {
            sh,
            produced: Vec::new(),
            actions: VecDeque::new(),
            prompt_text: String::new(),
        }
    }

    fn emit(&self, v: Value) {
        self.sh.emit(&v);
    }

    fn aborting(&self) -> bool {
        let st = self.sh.lock();
        self.sh.aborting(&st)
    }

    /// Emits a message's start/end, stores it in the session and in this run's messages.
    fn message_pair(&mut self, message: Value) {
        let mut st = self.sh.lock();
        self.sh
            .emit(&json!({ "type": "message_start", "message": message }));
        self.sh
            .emit(&json!({ "type": "message_end", "message": message }));
        st.session.append_message(&message);
        drop(st);
        self.produced.push(message);
    }

    /// Delivers user inputs (already taken off any queue) and loads the next script turn.
    fn deliver(&mut self, inputs: Vec<UserInput>) {
        if inputs.is_empty() {
            return;
        }
        for (i, input) in inputs.iter().enumerate() {
            if input.queued.is_some() {
                // Pi drops a queued message from its visible queue as the message starts.
                let st = self.sh.lock();
                self.sh.emit_queue_update(&st, &inputs[i + 1..]);
            }
            let mut content = vec![json!({ "type": "text", "text": input.text })];
            content.extend(input.images.iter().cloned());
            self.message_pair(json!({
                "role": "user",
                "content": content,
                "timestamp": crate::time::now_ms(),
            }));
        }
        self.prompt_text = inputs.last().map(|i| i.text.clone()).unwrap_or_default();
        let mut st = self.sh.lock();
        let turn = self.sh.script.turns.get(st.turn_cursor).cloned();
        st.turn_cursor += 1;
        drop(st);
        self.actions = turn.map(VecDeque::from).unwrap_or_default();
    }

    /// Takes queued steering (or follow-up) messages per the queue's mode; `deliver` announces
    /// their removal.
    fn take_queued(&self, follow_up: bool) -> Vec<UserInput> {
        let mut st = self.sh.lock();
        let all = if follow_up {
            st.follow_up_mode == "all"
        } else {
            st.steering_mode == "all"
        };
        let queue = if follow_up {
            &mut st.follow_up
        } else {
            &mut st.steering
        };
        if all {
            queue.drain(..).collect()
        } else {
            queue.pop_front().into_iter().collect()
        }
    }

    fn play(mut self, inputs: Vec<UserInput>) {
        {
            let mut st = self.sh.lock();
            self.sh.emit(&json!({ "type": "agent_start" }));
            for _ in 0..std::mem::take(&mut st.lost_settles) {
                self.sh
                    .emit(&json!({ "type": "agent_settled", "aborted": false }));
            }
        }
        self.emit(json!({ "type": "turn_start" }));
        // Pi 1.6 sends a system message when the prompt differs from the one the context
        // already carries; this prompt never changes, so: when the context has none. A resumed
        // session has one already; a fork of a session without one (or a new session) gets it.
        let send_system = self.sh.script.system_message
            && !self
                .sh
                .lock()
                .session
                .messages
                .iter()
                .any(|m| m["role"] == "system");
        if send_system {
            self.message_pair(json!({
                "role": "system",
                "sections": [{
                    "id": "scripted-agent",
                    "text": "You are threadbase's scripted agent: replies come from a JSON script.",
                }],
                "timestamp": crate::time::now_ms(),
            }));
        }
        let mut inputs = inputs;
        inputs.extend(self.take_queued(false));
        self.deliver(inputs);
        let (aborted, mut st) = loop {
            let aborted = self.turns();
            let st = self.sh.lock();
            let queued = !st.steering.is_empty() || !st.follow_up.is_empty();
            if aborted || !queued || st.shutdown {
                break (aborted, st);
            }
            // A message was queued after the last check: deliver it in this run rather than
            // leaving a "queued" message behind an idle agent.
            drop(st);
            let mut next = self.take_queued(false);
            if next.is_empty() {
                next = self.take_queued(true);
            }
            self.emit(json!({ "type": "turn_start" }));
            self.deliver(next);
        };
        st.streaming = false;
        st.streaming_reset = false;
        st.abort_requested = false;
        let waiters = std::mem::take(&mut st.abort_waiters);
        self.sh.emit(&json!({
            "type": "agent_end",
            "messages": self.produced,
            "willRetry": false,
        }));
        self.sh
            .emit(&json!({ "type": "agent_settled", "aborted": aborted }));
        for w in waiters {
            self.sh.emit(&response(w.as_ref(), "abort", Ok(None)));
        }
    }

    /// Plays turns until the run stops; true if it was aborted.
    fn turns(&mut self) -> bool {
        loop {
            // Inside an open turn: the model owes a message. Steps before it are latency.
            let msg = loop {
                match self.actions.pop_front() {
                    None => {
                        break Msg {
                            text: Some(self.sh.script.default_reply.clone()),
                            deltas: 1,
                            ..Msg::default()
                        }
                    }
                    Some(Action::Message(m)) => break m,
                    Some(other) => {
                        if self.side_action(other) {
                            let a = self.aborted_assistant(Vec::new());
                            self.message_pair(a.clone());
                            self.turn_end(&a, &[]);
                            return true;
                        }
                    }
                }
            };
            match self.stream_message(msg) {
                MsgEnd::Stopped { assistant, aborted } => {
                    self.turn_end(&assistant, &[]);
                    return aborted;
                }
                MsgEnd::ToolsAborted { assistant, results } => {
                    self.turn_end(&assistant, &results);
                    self.emit(json!({ "type": "turn_start" }));
                    let a = self.aborted_assistant(Vec::new());
                    self.message_pair(a.clone());
                    self.turn_end(&a, &[]);
                    return true;
                }
                MsgEnd::Done { assistant, results } => {
                    let more_messages =
                        self.actions.iter().any(|a| matches!(a, Action::Message(_)));
                    let mut aborted = false;
                    if results.is_empty() && !more_messages {
                        // Steps after the last message run before its turn_end.
                        while let Some(a) = self.actions.pop_front() {
                            if self.side_action(a) {
                                aborted = true;
                                break;
                            }
                        }
                    }
                    self.turn_end(&assistant, &results);
                    if aborted {
                        return true;
                    }
                    let steering = self.take_queued(false);
                    if !steering.is_empty() {
                        self.emit(json!({ "type": "turn_start" }));
                        self.deliver(steering);
                        continue;
                    }
                    if !results.is_empty() || more_messages {
                        self.emit(json!({ "type": "turn_start" }));
                        continue;
                    }
                    let follow = self.take_queued(true);
                    if !follow.is_empty() {
                        self.emit(json!({ "type": "turn_start" }));
                        self.deliver(follow);
                        continue;
                    }
                    return false;
                }
            }
        }
    }

    fn turn_end(&self, assistant: &Value, results: &[Value]) {
        self.emit(json!({ "type": "turn_end", "message": assistant, "toolResults": results }));
    }

    /// Runs a non-message step; true if the run was aborted during or before it.
    fn side_action(&mut self, action: Action) -> bool {
        if self.aborting() {
            return true;
        }
        match action {
            Action::Message(_) => false,
            Action::Delay(ms) => self.sh.wait_ms(ms),
            Action::Stderr(text) => {
                write_stderr(&text);
                false
            }
            Action::Exit(code) => self.sh.exit_now(code),
            Action::Crash { abort } => {
                let _ = std::io::stdout().flush();
                if abort {
                    std::process::abort();
                }
                let _ = rustix::process::kill_process(
                    rustix::process::getpid(),
                    rustix::process::Signal::KILL,
                );
                std::process::abort();
            }
            Action::CustomEntry { custom_type, data } => {
                let mut st = self.sh.lock();
                let mut f = Map::new();
                f.insert("customType".into(), json!(custom_type));
                f.insert("data".into(), data);
                let entry = st.session.append("custom", f);
                self.sh
                    .emit(&json!({ "type": "entry_appended", "entry": entry }));
                false
            }
            Action::Ui(fields) => self.ui(fields),
        }
    }

    fn ui(&mut self, fields: Map<String, Value>) -> bool {
        let id = uuid_v4();
        let method = fields
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let dialog = matches!(method.as_str(), "select" | "confirm" | "input" | "editor");
        let mut req = Map::new();
        req.insert("type".into(), json!("extension_ui_request"));
        req.insert("id".into(), json!(id));
        req.extend(fields.clone());
        let mut st = self.sh.lock();
        if dialog {
            st.pending_ui.insert(id.clone());
        }
        self.sh.emit(&Value::Object(req));
        if !dialog {
            return false;
        }
        let deadline = fields
            .get("timeout")
            .and_then(Value::as_u64)
            .filter(|t| *t > 0)
            .map(|t| Instant::now() + Duration::from_millis(t));
        loop {
            if let Some(answer) = st.ui_answers.remove(&id) {
                st.last_ui = ui_answer_text(&method, &answer);
                return false;
            }
            if self.sh.aborting(&st) {
                st.pending_ui.remove(&id);
                st.last_ui = "cancelled".into();
                return true;
            }
            match deadline {
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        st.pending_ui.remove(&id);
                        st.last_ui = "cancelled".into();
                        return false;
                    }
                    st = self
                        .sh
                        .cv
                        .wait_timeout(st, d - now)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                None => st = self.sh.cv.wait(st).unwrap_or_else(|p| p.into_inner()),
            }
        }
    }

    fn usage(input: u64, output: u64) -> Value {
        json!({
            "input": input,
            "output": output,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": input + output,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        })
    }

    fn assistant(
        &self,
        content: Vec<Value>,
        stop: &str,
        error: Option<&str>,
        usage: Value,
    ) -> Value {
        let mut st = self.sh.lock();
        st.response_counter += 1;
        let mut m = Map::new();
        m.insert("role".into(), json!("assistant"));
        m.insert("content".into(), Value::Array(content));
        m.insert("api".into(), json!("openai-completions"));
        m.insert("provider".into(), json!(st.provider));
        m.insert("model".into(), json!(st.model_id));
        m.insert("usage".into(), usage);
        m.insert("stopReason".into(), json!(stop));
        if let Some(e) = error {
            m.insert("errorMessage".into(), json!(e));
        }
        m.insert("timestamp".into(), json!(crate::time::now_ms()));
        m.insert(
            "responseId".into(),
            json!(format!("scripted-{}", st.response_counter)),
        );
        Value::Object(m)
    }

    fn aborted_assistant(&self, content: Vec<Value>) -> Value {
        self.assistant(
            content,
            "aborted",
            Some("Request was aborted"),
            Self::usage(0, 0),
        )
    }

    fn fill(&self, text: &str) -> String {
        let st = self.sh.lock();
        text.replace("{prompt}", &self.prompt_text)
            .replace("{ui}", &st.last_ui)
            .replace("{session_id}", &st.session.id)
    }

    fn update(&self, event: Value) {
        self.emit(json!({
            "type": "message_update",
            "usage": Self::usage(0, 0),
            "assistantMessageEvent": event,
        }));
    }

    fn stream_message(&mut self, msg: Msg) -> MsgEnd {
        if (msg.delay_ms > 0 && self.sh.wait_ms(msg.delay_ms)) || self.aborting() {
            let a = self.aborted_assistant(Vec::new());
            self.message_pair(a.clone());
            return MsgEnd::Stopped {
                assistant: a,
                aborted: true,
            };
        }
        let input_tokens = {
            let st = self.sh.lock();
            10 + 5 * st.session.messages.len() as u64
        };
        if let Some(err) = &msg.error {
            let a = self.assistant(Vec::new(), "error", Some(err), Self::usage(input_tokens, 0));
            self.message_pair(a.clone());
            return MsgEnd::Stopped {
                assistant: a,
                aborted: false,
            };
        }
        let partial = self.assistant(Vec::new(), "stop", None, Self::usage(0, 0));
        self.emit(json!({ "type": "message_start", "message": partial }));
        let mut content: Vec<Value> = Vec::new();
        let mut out_chars = 0usize;
        if let Some(thinking) = &msg.thinking {
            let thinking = self.fill(thinking);
            let i = content.len();
            self.update(json!({"type": "thinking_start", "contentIndex": i}));
            self.update(json!({"type": "thinking_delta", "contentIndex": i, "delta": thinking}));
            self.update(json!({"type": "thinking_end", "contentIndex": i, "content": thinking}));
            out_chars += thinking.len();
            content.push(json!({"type": "thinking", "thinking": thinking}));
        }
        if let Some(text) = &msg.text {
            let text = self.fill(text);
            let i = content.len();
            self.update(json!({"type": "text_start", "contentIndex": i}));
            let mut so_far = String::new();
            for chunk in split_chunks(&text, msg.deltas) {
                if self.aborting() {
                    return self.abort_streaming(content, &so_far);
                }
                so_far.push_str(chunk);
                self.update(json!({"type": "text_delta", "contentIndex": i, "delta": chunk}));
                if msg.delta_delay_ms > 0 && self.sh.wait_ms(msg.delta_delay_ms) {
                    return self.abort_streaming(content, &so_far);
                }
            }
            self.update(json!({"type": "text_end", "contentIndex": i, "content": text}));
            out_chars += text.len();
            content.push(json!({"type": "text", "text": text}));
        }
        let mut calls = Vec::new();
        for tool in &msg.tools {
            if self.aborting() {
                return self.abort_streaming(content, "");
            }
            let id = tool.id.clone().unwrap_or_else(|| {
                let mut st = self.sh.lock();
                st.tool_counter += 1;
                format!("call_{}", st.tool_counter)
            });
            let i = content.len();
            let args_json = tool.args.to_string();
            self.update(json!({"type": "toolcall_start", "contentIndex": i, "id": id, "toolName": tool.name}));
            self.update(json!({"type": "toolcall_delta", "contentIndex": i, "delta": args_json}));
            let call =
                json!({"type": "toolCall", "id": id, "name": tool.name, "arguments": tool.args});
            self.update(json!({"type": "toolcall_end", "contentIndex": i, "toolCall": call}));
            out_chars += args_json.len();
            content.push(call);
            calls.push((id, tool.clone()));
        }
        let stop = if calls.is_empty() { "stop" } else { "toolUse" };
        let usage = Self::usage(input_tokens, (out_chars as u64).div_ceil(4).max(1));
        // The final message keeps the identity (timestamp, responseId) of the streamed partial.
        let mut assistant = partial;
        assistant["content"] = Value::Array(content);
        assistant["usage"] = usage;
        assistant["stopReason"] = json!(stop);
        {
            let mut st = self.sh.lock();
            self.sh
                .emit(&json!({ "type": "message_end", "message": assistant }));
            st.session.append_message(&assistant);
        }
        self.produced.push(assistant.clone());
        let mut results = Vec::new();
        for (id, tool) in calls {
            let (result, aborted) = self.execute_tool(&id, &tool);
            self.message_pair(result.clone());
            results.push(result);
            if aborted {
                return MsgEnd::ToolsAborted { assistant, results };
            }
        }
        MsgEnd::Done { assistant, results }
    }

    fn abort_streaming(&mut self, mut content: Vec<Value>, text_so_far: &str) -> MsgEnd {
        if !text_so_far.is_empty() {
            content.push(json!({"type": "text", "text": text_so_far}));
        }
        let a = self.aborted_assistant(content);
        {
            let mut st = self.sh.lock();
            self.sh
                .emit(&json!({ "type": "message_end", "message": a }));
            st.session.append_message(&a);
        }
        self.produced.push(a.clone());
        MsgEnd::Stopped {
            assistant: a,
            aborted: true,
        }
    }

    /// Plays one tool execution; returns the toolResult message and whether it was aborted.
    fn execute_tool(&mut self, id: &str, tool: &ToolSpec) -> (Value, bool) {
        let started = Instant::now();
        self.emit(json!({
            "type": "tool_execution_start",
            "toolCallId": id,
            "toolName": tool.name,
            "args": tool.args,
        }));
        let slices = tool.updates as u64 + 1;
        let pause = tool.duration_ms / slices;
        let chunks = split_chunks(&tool.result, tool.updates.max(1));
        let mut aborted = false;
        let mut partial = String::new();
        let mut emitted = 0u64;
        for chunk in chunks.iter().take(tool.updates) {
            if self.sh.wait_ms(pause) {
                aborted = true;
                break;
            }
            emitted += 1;
            partial.push_str(chunk);
            self.emit(json!({
                "type": "tool_execution_update",
                "toolCallId": id,
                "toolName": tool.name,
                "args": tool.args,
                "partialResult": {"content": [{"type": "text", "text": partial}], "details": {}},
            }));
        }
        if !aborted {
            let rest = tool.duration_ms.saturating_sub(pause * emitted);
            aborted = self.sh.wait_ms(rest);
        }
        let (text, is_error, details) = if aborted {
            ("Operation aborted".to_string(), true, json!({}))
        } else {
            (tool.result.clone(), tool.is_error, tool.details.clone())
        };
        let result = json!({"content": [{"type": "text", "text": text}], "details": details});
        self.emit(json!({
            "type": "tool_execution_end",
            "toolCallId": id,
            "toolName": tool.name,
            "result": result,
            "isError": is_error,
            "durationMs": started.elapsed().as_millis() as u64,
        }));
        let message = json!({
            "role": "toolResult",
            "toolCallId": id,
            "toolName": tool.name,
            "content": result["content"],
            "details": result["details"],
            "isError": is_error,
            "timestamp": crate::time::now_ms(),
        });
        (message, aborted)
    }
}

fn ui_answer_text(method: &str, answer: &Value) -> String {
    if answer.get("cancelled").and_then(Value::as_bool) == Some(true) {
        return "cancelled".into();
    }
    if method == "confirm" {
        return answer
            .get("confirmed")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            .to_string();
    }
    match answer.get("value") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "cancelled".into(),
        Some(other) => other.to_string(),
    }
}

/// Splits `text` into `n` consecutive pieces of about equal length, on char boundaries; empty
/// pieces are dropped (an empty text gives no piece).
fn split_chunks(text: &str, n: usize) -> Vec<&str> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let n = n.max(1).min(chars.len().max(1));
    let mut out = Vec::with_capacity(n);
    let mut start_char = 0usize;
    for k in 1..=n {
        let end_char = chars.len() * k / n;
        if end_char > start_char {
            let start = chars[start_char].0;
            let end = chars.get(end_char).map_or(text.len(), |c| c.0);
            out.push(&text[start..end]);
        }
        start_char = end_char;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_text() {
        assert_eq!(split_chunks("hello", 2), vec!["he", "llo"]);
        assert_eq!(split_chunks("héllo wörld", 3).concat(), "héllo wörld");
        assert_eq!(split_chunks("ab", 10), vec!["a", "b"]);
        assert!(split_chunks("", 3).is_empty());
    }

    #[test]
    fn uuids_have_the_right_shape() {
        let v7 = uuid_v7();
        assert_eq!(v7.len(), 36);
        assert_eq!(&v7[14..15], "7");
        let v4 = uuid_v4();
        assert_eq!(v4.len(), 36);
        assert_eq!(&v4[14..15], "4");
    }

    #[test]
    fn steps_group_into_messages() {
        let turn = json!([
            {"text": "a"}, {"tool": "bash", "args": {"command": "ls"}}, {"tool": "read"},
            {"delay_ms": 5}, {"tool": "x"}, {"error": "boom"}
        ]);
        let actions = parse_turn(&turn).unwrap();
        assert_eq!(actions.len(), 4);
        match &actions[0] {
            Action::Message(m) => {
                assert_eq!(m.text.as_deref(), Some("a"));
                assert_eq!(m.tools.len(), 2);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(actions[1], Action::Delay(5)));
        assert!(parse_turn(&json!([{"text": "a", "bogus": 1}])).is_err());
        assert!(parse_turn(&json!([{"ui": "dance"}])).is_err());
    }

    #[test]
    fn flags_parse_like_pi() {
        let a = |v: &[&str]| Args::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let ok = a(&[
            "--mode",
            "rpc",
            "--session",
            "/tmp/x.jsonl",
            "--name",
            "n",
            "--no-approve",
            "--model",
            "fake/m:high",
            "--exclude-tools",
            "bash",
            "--offline",
            "-nt",
        ])
        .unwrap();
        assert_eq!(ok.session.as_deref(), Some("/tmp/x.jsonl"));
        assert_eq!(ok.name.as_deref(), Some("n"));
        assert_eq!(
            a(&["--mode", "rpc", "--bogus"]).unwrap_err(),
            "Error: Unknown option: --bogus"
        );
        assert!(a(&["--session", "/x.jsonl"]).is_err());
        assert!(a(&["--mode", "rpc", "@file.md"]).is_err());
        assert!(a(&[
            "--mode",
            "rpc",
            "--fork",
            "/a.jsonl",
            "--session",
            "/b.jsonl"
        ])
        .is_err());
    }

    #[test]
    fn tree_nests_children() {
        let entries = vec![
            json!({"id": "a", "parentId": null}),
            json!({"id": "b", "parentId": "a"}),
            json!({"id": "c", "parentId": "a"}),
            json!({"id": "d", "parentId": "b"}),
        ];
        let t = build_tree(&entries);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0]["children"].as_array().unwrap().len(), 2);
        assert_eq!(t[0]["children"][0]["children"][0]["entry"]["id"], "d");
    }
}
