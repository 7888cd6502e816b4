//! The script the scripted agent plays, read with serde: unknown fields are refused, so a
//! mistyped field fails the test that wrote it instead of being ignored.
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
//! | `list_models` | what `--list-models` prints, as Pi prints the models that have credentials: `[{"provider": "fake", "id": "m", "reasoning": false}]`; default the one model of `provider`/`model` |
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
//! | `{"write": {"path": "…", "content": "…"}}` | writes `content` to the file at `path` (both with `{prompt}` and the other placeholders of `text` filled; relative to the agent's cwd; missing folders made), emitting nothing: a tool's effect on disk without its events (issue 48's worktree tests); a failure is written to stderr |
//! | `{"exit": code}` | exits at once with that code (stdout flushed, no further events) |
//! | `{"crash": true}` | kills itself with SIGKILL at once (`"crash": "abort"` uses `abort()`, SIGABRT) |
//!
//! Placement: steps before a message run as model latency after `turn_start`; steps after the last
//! message of a turn that made no tool call run before its `turn_end` (so `[{"text":"hi"},
//! {"exit":3}]` dies between `message_end` and `turn_end`). If a turn's steps run out while the
//! model owes a reply (at the start, or after tool results) the reply is `default_reply`. A
//! text-only message that is not the turn's last message is followed by `turn_end`/`turn_start`
//! and the next message, which real Pi would only do after a steering message.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// How long a prompt's preflight takes by default (Pi 1.6: input hooks and the auth check, a
/// few event-loop turns).
const DEFAULT_PREFLIGHT_MS: u64 = 5;

/// A script, read and checked.
#[derive(Debug, Clone)]
pub(super) struct Script {
    pub(super) startup_delay_ms: u64,
    pub(super) preflight_ms: u64,
    pub(super) startup_stderr: Option<String>,
    pub(super) startup_exit: Option<i32>,
    pub(super) reject_prompts: Option<String>,
    pub(super) ignore_abort: bool,
    pub(super) ignore_sigterm: bool,
    pub(super) grandchild: Option<Vec<String>>,
    pub(super) session_id: Option<String>,
    pub(super) system_message: bool,
    pub(super) default_reply: String,
    pub(super) provider: Option<String>,
    pub(super) model: Option<String>,
    /// What `--list-models` prints: `(provider, id, reasoning)`; default the one model of
    /// `provider`/`model`.
    pub(super) list_models: Vec<(String, String, bool)>,
    pub(super) turns: Vec<Vec<Action>>,
}

/// One step of a turn, tool calls already joined to their message.
#[derive(Debug, Clone)]
pub(super) enum Action {
    Message(Msg),
    Delay(u64),
    Ui(Map<String, Value>),
    Stderr(String),
    Exit(i32),
    Crash { abort: bool },
    CustomEntry { custom_type: String, data: Value },
    Write { path: String, content: String },
}

/// An assistant message: text, thinking and tool calls, or a model error.
#[derive(Debug, Clone, Default)]
pub(super) struct Msg {
    pub(super) thinking: Option<String>,
    pub(super) text: Option<String>,
    pub(super) deltas: usize,
    pub(super) delay_ms: u64,
    pub(super) delta_delay_ms: u64,
    pub(super) tools: Vec<ToolSpec>,
    pub(super) error: Option<String>,
}

/// A scripted tool call and its result.
#[derive(Debug, Clone)]
pub(super) struct ToolSpec {
    pub(super) name: String,
    pub(super) id: Option<String>,
    pub(super) args: Value,
    pub(super) result: String,
    pub(super) is_error: bool,
    pub(super) updates: usize,
    pub(super) duration_ms: u64,
    pub(super) details: Value,
}

/// The script file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    #[serde(default)]
    startup_delay_ms: u64,
    #[serde(default = "default_preflight_ms")]
    preflight_ms: u64,
    startup_stderr: Option<String>,
    startup_exit: Option<i32>,
    #[serde(default)]
    reject_prompts: Value,
    #[serde(default)]
    ignore_abort: bool,
    #[serde(default)]
    ignore_sigterm: bool,
    #[serde(default)]
    spawn_grandchild: Value,
    session_id: Option<String>,
    #[serde(default = "yes")]
    system_message: bool,
    #[serde(default = "default_reply")]
    default_reply: String,
    provider: Option<String>,
    model: Option<String>,
    list_models: Option<Vec<ListedModel>>,
    #[serde(default)]
    turns: Vec<Value>,
}

/// One model `--list-models` prints (`{"provider": "fake", "id": "m", "reasoning": false}`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListedModel {
    provider: String,
    id: String,
    #[serde(default)]
    reasoning: bool,
}

fn default_preflight_ms() -> u64 {
    DEFAULT_PREFLIGHT_MS
}
fn yes() -> bool {
    true
}
fn default_reply() -> String {
    "done: {prompt}".into()
}
fn one() -> u64 {
    1
}
fn empty_object() -> Value {
    Value::Object(Map::new())
}
/// A field given as `null` is `Some(Null)`, told apart from a missing one.
fn present<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// `{"steps": [...]}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepsObject {
    steps: Vec<Value>,
}

/// `{"text": …}` or `{"thinking": …}`: an assistant message.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextStep {
    text: Option<String>,
    thinking: Option<String>,
    #[serde(default = "one")]
    deltas: u64,
    #[serde(default)]
    delay_ms: u64,
    #[serde(default)]
    delta_delay_ms: u64,
}

/// `{"tool": …}`: a tool call, joining the open message.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolStep {
    tool: String,
    id: Option<String>,
    #[serde(default)]
    args: Map<String, Value>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default)]
    is_error: bool,
    #[serde(default = "one")]
    updates: u64,
    #[serde(default)]
    duration_ms: u64,
    #[serde(default = "empty_object")]
    details: Value,
}

/// `{"error": …}`: a failed model call.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorStep {
    error: String,
    #[serde(default)]
    delay_ms: u64,
}

/// `{"ui": …}`: an extension UI request; every other field is copied into it.
#[derive(Deserialize)]
struct UiStep {
    ui: String,
    #[serde(flatten)]
    fields: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StderrStep {
    stderr: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExitStep {
    exit: i32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CrashStep {
    crash: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CustomEntryStep {
    custom_entry: String,
    #[serde(default)]
    data: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteStep {
    write: WriteFile,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteFile {
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DelayStep {
    delay_ms: u64,
}

/// The UI methods a step may name.
const UI_METHODS: [&str; 9] = [
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

fn bad_script(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::invalid(format!(
        "Invalid scripted-agent script {}: {what}. Repair: fix the script; the format is documented in src/pi/scripted_agent/script.rs.",
        path.display()
    ))
}

impl Script {
    pub(super) fn load(path: &Path) -> Result<Script> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::io(format!(
                "Cannot read the scripted-agent script {}: {e}. Repair: pass an existing JSON file to --script.",
                path.display()
            ))
        })?;
        let file: ScriptFile = serde_json::from_str(&text).map_err(|e| bad_script(path, e))?;
        Script::from_file(file).map_err(|e| bad_script(path, e))
    }

    fn from_file(f: ScriptFile) -> std::result::Result<Script, String> {
        let reject_prompts = match f.reject_prompts {
            Value::Bool(false) | Value::Null => None,
            Value::Bool(true) => Some(String::new()),
            Value::String(t) => Some(t),
            _ => return Err("reject_prompts must be a boolean or a string".into()),
        };
        const GRANDCHILD: &str =
            "spawn_grandchild must be a boolean or a non-empty array of strings";
        let grandchild = match f.spawn_grandchild {
            Value::Bool(false) | Value::Null => None,
            Value::Bool(true) => Some(vec!["sleep".into(), "1000".into()]),
            Value::Array(items) => Some(
                items
                    .iter()
                    .map(|i| i.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .filter(|a| !a.is_empty())
                    .ok_or(GRANDCHILD)?,
            ),
            _ => return Err(GRANDCHILD.into()),
        };
        let turns = f
            .turns
            .iter()
            .enumerate()
            .map(|(i, t)| parse_turn(t).map_err(|e| format!("turns[{i}]: {e}")))
            .collect::<std::result::Result<_, _>>()?;
        Ok(Script {
            startup_delay_ms: f.startup_delay_ms,
            preflight_ms: f.preflight_ms,
            startup_stderr: f.startup_stderr,
            startup_exit: f.startup_exit,
            reject_prompts,
            ignore_abort: f.ignore_abort,
            ignore_sigterm: f.ignore_sigterm,
            grandchild,
            session_id: f.session_id,
            system_message: f.system_message,
            default_reply: f.default_reply,
            list_models: match f.list_models {
                Some(list) => list
                    .into_iter()
                    .map(|m| (m.provider, m.id, m.reasoning))
                    .collect(),
                None => vec![(
                    f.provider.clone().unwrap_or_else(|| "scripted".into()),
                    f.model.clone().unwrap_or_else(|| "scripted-model".into()),
                    false,
                )],
            },
            provider: f.provider,
            model: f.model,
            turns,
        })
    }
}

/// One step read as its kind's struct.
fn step<T: DeserializeOwned>(step: &Value) -> std::result::Result<T, String> {
    T::deserialize(step).map_err(|e| e.to_string())
}

pub(super) fn parse_turn(t: &Value) -> std::result::Result<Vec<Action>, String> {
    let steps: Vec<Value> = match t {
        Value::String(s) => {
            let mut text = Map::new();
            text.insert("text".into(), Value::String(s.clone()));
            vec![Value::Object(text)]
        }
        Value::Array(a) => a.clone(),
        Value::Object(_) => step::<StepsObject>(t)?.steps,
        _ => return Err("a turn is an array of steps, {\"steps\": [...]}, or a string".into()),
    };
    let mut actions: Vec<Action> = Vec::new();
    // Whether the last action is a message that a following tool step may join.
    let mut open = false;
    for (i, v) in steps.iter().enumerate() {
        let err = |e: String| format!("step {i}: {e}");
        let obj = v
            .as_object()
            .ok_or_else(|| err("a step must be an object".into()))?;
        let has = |k: &str| obj.contains_key(k);
        let action = if has("text") || has("thinking") {
            let s: TextStep = step(v).map_err(err)?;
            Action::Message(Msg {
                thinking: s.thinking,
                text: s.text,
                deltas: s.deltas.clamp(1, 100_000) as usize,
                delay_ms: s.delay_ms,
                delta_delay_ms: s.delta_delay_ms,
                tools: Vec::new(),
                error: None,
            })
        } else if has("tool") {
            let s: ToolStep = step(v).map_err(err)?;
            let tool = ToolSpec {
                name: s.tool,
                id: s.id,
                args: Value::Object(s.args),
                result: match s.result {
                    None => String::new(),
                    Some(Value::String(s)) => s,
                    Some(other) => other.to_string(),
                },
                is_error: s.is_error,
                updates: s.updates.min(100_000) as usize,
                duration_ms: s.duration_ms,
                details: s.details,
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
            continue;
        } else if has("error") {
            let s: ErrorStep = step(v).map_err(err)?;
            Action::Message(Msg {
                error: Some(s.error),
                delay_ms: s.delay_ms,
                deltas: 1,
                ..Msg::default()
            })
        } else if has("ui") {
            Action::Ui(ui_fields(step(v).map_err(err)?).map_err(err)?)
        } else if has("stderr") {
            Action::Stderr(step::<StderrStep>(v).map_err(err)?.stderr)
        } else if has("exit") {
            Action::Exit(step::<ExitStep>(v).map_err(err)?.exit)
        } else if has("crash") {
            let abort = match step::<CrashStep>(v).map_err(err)?.crash {
                Value::Bool(true) => false,
                Value::String(s) if s == "kill" => false,
                Value::String(s) if s == "abort" => true,
                _ => return Err(err("crash must be true, \"kill\" or \"abort\"".into())),
            };
            Action::Crash { abort }
        } else if has("custom_entry") {
            let s: CustomEntryStep = step(v).map_err(err)?;
            Action::CustomEntry {
                custom_type: s.custom_entry,
                data: s.data,
            }
        } else if has("write") {
            let s = step::<WriteStep>(v).map_err(err)?.write;
            Action::Write {
                path: s.path,
                content: s.content,
            }
        } else if has("delay_ms") {
            Action::Delay(step::<DelayStep>(v).map_err(err)?.delay_ms)
        } else {
            return Err(err(
                "unknown step (expected one of text, tool, error, delay_ms, ui, custom_entry, write, stderr, exit, crash)"
                    .into(),
            ));
        };
        // A text message stays open for the tool steps that follow it.
        open = matches!(&action, Action::Message(m) if m.error.is_none());
        actions.push(action);
    }
    Ok(actions)
}

/// The fields of an `extension_ui_request` for a `ui` step: `method` first, then the step's
/// other fields as given (`type`, `id` and `method` are the request's own).
fn ui_fields(s: UiStep) -> std::result::Result<Map<String, Value>, String> {
    let method = s.ui;
    if !UI_METHODS.contains(&method.as_str()) {
        return Err(format!(
            "unknown ui method {method:?} (one of {})",
            UI_METHODS.join(", ")
        ));
    }
    if let Some(t) = s.fields.get("timeout") {
        if t.as_u64().is_none() {
            return Err("timeout must be a non-negative integer".into());
        }
    }
    let mut fields = Map::new();
    fields.insert("method".into(), Value::String(method.clone()));
    for (k, v) in s.fields {
        if k != "type" && k != "id" && k != "method" {
            fields.insert(k, v);
        }
    }
    if method == "select" && !fields.contains_key("options") {
        fields.insert(
            "options".into(),
            Value::Array(vec!["Yes".into(), "No".into()]),
        );
    }
    if method == "notify" && !fields.contains_key("message") {
        if let Some(title) = fields.remove("title") {
            fields.insert("message".into(), title);
        }
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
