//! Contract B (`agent_*`, the subagent lifecycle): strict request validation, the thread view
//! every tool answers with, and the notice texts. Nothing here touches the store or the
//! runtime. Texts follow the public implementation (`reference/contract-semantics.md` §2);
//! every rejection ends with a `Repair:` hint.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::contract::fields::type_name;
use crate::error::{Error, Result};
use crate::text::{utf16_len, utf16_prefix};

/// Contract B's status for work interrupted by a reload (its owner died).
pub const PAUSED_STATUS: &str = "Interrupted by reload; send input to resume";

/// Longest wait (`timeoutMs`), one hour.
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;
/// The report-only timeout of agent_spawn and agent_steer (`timeoutMs`): 30 s to 5 min.
pub const REPORT_TIMEOUT_MS: (u64, u64) = (30_000, 300_000);
/// The original's text for a `timeoutMs` of agent_spawn or agent_steer out of range.
pub const REPORT_TIMEOUT_INVALID: &str =
    "timeoutMs must be an integer between 30000 (30s) and 300000 (5min)";
/// agent_steer with neither a message nor a timeout.
pub const STEER_NEEDS_SOMETHING: &str = "Provide message, timeoutMs, or both";
/// agent_steer with only a timeout, of a thread that is not working (or is stopping).
pub const NO_TIMEOUT_TO_EXTEND: &str = "Only a working agent has a timeout to extend";
/// How many of a timeout notice's last entries are searched for assistant text, how many
/// assistant messages it quotes, and the longest `recentOutput` (its end is kept).
pub const RECENT_ENTRIES: usize = 6;
pub const RECENT_MESSAGES: usize = 2;
pub const RECENT_OUTPUT_CHARS: usize = 2_000;
/// `agent_update` message length, UTF-16 units.
pub const MAX_UPDATE_CHARS: usize = 8_000;
/// `agent_output` page size: default and maximum, UTF-16 units.
pub const DEFAULT_OUTPUT_LIMIT: usize = 8_000;
pub const MAX_OUTPUT_LIMIT: usize = 16_000;
/// `output` in a view and the final answer in a completion notice are cut at this length.
pub const VIEW_OUTPUT_CHARS: usize = 16_000;
/// The error a stopped run keeps (the original's driver throws it when its run is aborted).
pub const RUN_ABORTED: &str = "Subagent run aborted";

pub const STATUS_STARTING: &str = "Starting";
pub const STATUS_WORKING: &str = "Working";
pub const STATUS_COMPLETED: &str = "Completed; session retained";
pub const STATUS_STOPPING: &str = "Stopping";
pub const STATUS_STOPPED: &str = "Stopped; session retained";
pub const STATUS_PAUSED_DEFAULT: &str = "Awaiting further input";
pub const OUTPUT_TRUNCATED_NOTE: &str = "[Output truncated; use agent_output for more.]";

/// A validated contract B request, one variant per method.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentRequest {
    Spawn(Spawn),
    Wait(Wait),
    Steer(Steer),
    Status(Status),
    Update(Update),
    Pause(Pause),
    Stop(Stop),
    Output(Output),
    /// `/agents reap` of the Pi extension (not a model tool; the main session only): forget
    /// the completed threads with no descendant that stays.
    Reap(Reap),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Spawn {
    pub path: String,
    pub task: String,
    pub kind: String,
    pub wait: bool,
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Wait {
    pub path: String,
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Steer {
    pub path: String,
    pub message: Option<String>,
    pub timeout_ms: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub path: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Pause {
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stop {
    pub path: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub path: String,
    pub offset: usize,
    pub limit: usize,
}

/// `{dryRun?: boolean}` → [`ReapResult`]; `dry_run` only counts.
#[derive(Debug, Clone, PartialEq)]
pub struct Reap {
    pub dry_run: bool,
}

/// One method of contract B: its name on `serve`, its fields, the shape a rejection shows,
/// whether it is a model tool, and how its fields become its request. The one place a
/// method's name is spelled.
pub struct Method {
    pub name: &'static str,
    pub fields: &'static [&'static str],
    pub shape: &'static str,
    /// A model tool (`agent_*`); `agents.reap` is the extension's `/agents reap` command.
    pub tool: bool,
    parse: fn(&Method, &Map<String, Value>) -> Result<AgentRequest>,
}

/// Contract B's methods on `serve`, in the order the server lists them.
pub const METHODS: [Method; 9] = [
    Method {
        name: "agent_spawn",
        fields: &["path", "task", "type", "wait", "timeoutMs"],
        shape: r#"{"path": "fix-auth", "type": "worker", "task": "…", "wait": true, "timeoutMs": 60000}"#,
        tool: true,
        parse: |m, p| {
            // Required, as in the original's schema (`type: String({minLength: 1})`).
            let kind = required_string(m, p, "type")?;
            if !crate::paths::is_agent_segment(&kind) {
                return Err(bad(
                    m,
                    "type must be a name of letters, digits, - or _".into(),
                ));
            }
            let wait = match p.get("wait") {
                None => true,
                Some(Value::Bool(b)) => *b,
                Some(other) => {
                    return Err(bad(
                        m,
                        format!("wait must be a boolean, got {}", type_name(other)),
                    ))
                }
            };
            Ok(AgentRequest::Spawn(Spawn {
                path: required_string(m, p, "path")?,
                task: required_string(m, p, "task")?,
                kind,
                wait,
                timeout_ms: report_timeout(m, p)?,
            }))
        },
    },
    Method {
        name: "agent_wait",
        fields: &["path", "timeoutMs"],
        shape: r#"{"path": "/root/fix-auth", "timeoutMs": 30000}"#,
        tool: true,
        parse: |m, p| {
            Ok(AgentRequest::Wait(Wait {
                path: required_string(m, p, "path")?,
                timeout_ms: integer_field(m, p, "timeoutMs", 0, MAX_TIMEOUT_MS)?,
            }))
        },
    },
    Method {
        name: "agent_steer",
        fields: &["path", "message", "timeoutMs"],
        shape: r#"{"path": "/root/fix-auth", "message": "…", "timeoutMs": 60000}"#,
        tool: true,
        parse: |m, p| {
            let path = required_string(m, p, "path")?;
            let message = string_field(m, p, "message")?;
            let timeout_ms = report_timeout(m, p)?;
            if message.is_none() && timeout_ms.is_none() {
                return Err(Error::invalid(format!(
                    "{STEER_NEEDS_SOMETHING}. Repair: send {{\"path\": \"{path}\", \"message\": \"…\"}} to steer or resume it, {{\"path\": \"{path}\", \"timeoutMs\": 60000}} to re-arm its timeout, or both."
                )));
            }
            Ok(AgentRequest::Steer(Steer {
                path,
                message,
                timeout_ms,
            }))
        },
    },
    Method {
        name: "agent_status",
        fields: &["path"],
        shape: r#"{} or {"path": "/root/fix-auth"}"#,
        tool: true,
        parse: |m, p| {
            Ok(AgentRequest::Status(Status {
                path: string_field(m, p, "path")?,
            }))
        },
    },
    Method {
        name: "agent_update",
        fields: &["message"],
        shape: r#"{"message": "halfway: tests pass"}"#,
        tool: true,
        parse: |m, p| {
            let message = required_string(m, p, "message")?;
            let n = utf16_len(&message);
            if n == 0 || n > MAX_UPDATE_CHARS {
                return Err(bad(
                    m,
                    format!("message must be 1 to {MAX_UPDATE_CHARS} characters, got {n}"),
                ));
            }
            Ok(AgentRequest::Update(Update { message }))
        },
    },
    Method {
        name: "agent_pause",
        fields: &["reason"],
        shape: r#"{"reason": "need a decision on the API"}"#,
        tool: true,
        parse: |m, p| {
            Ok(AgentRequest::Pause(Pause {
                reason: required_string(m, p, "reason")?,
            }))
        },
    },
    Method {
        name: "agent_stop",
        fields: &["path"],
        shape: r#"{"path": "/root/fix-auth"}"#,
        tool: true,
        parse: |m, p| {
            Ok(AgentRequest::Stop(Stop {
                path: required_string(m, p, "path")?,
            }))
        },
    },
    Method {
        name: "agent_output",
        fields: &["path", "offset", "limit"],
        shape: r#"{"path": "/root/fix-auth", "offset": 0, "limit": 8000}"#,
        tool: true,
        parse: |m, p| {
            Ok(AgentRequest::Output(Output {
                path: required_string(m, p, "path")?,
                offset: integer_field(m, p, "offset", 0, u32::MAX as u64)?.unwrap_or(0) as usize,
                limit: integer_field(m, p, "limit", 1, MAX_OUTPUT_LIMIT as u64)?
                    .unwrap_or(DEFAULT_OUTPUT_LIMIT as u64) as usize,
            }))
        },
    },
    Method {
        name: "agents.reap",
        fields: &["dryRun"],
        shape: r#"{"dryRun": true}"#,
        tool: false,
        parse: |m, p| {
            Ok(AgentRequest::Reap(Reap {
                dry_run: match p.get("dryRun") {
                    None => false,
                    Some(Value::Bool(b)) => *b,
                    Some(other) => {
                        return Err(bad(
                            m,
                            format!("dryRun must be a boolean, got {}", type_name(other)),
                        ))
                    }
                },
            }))
        },
    },
];

/// The contract B method named `name`.
pub fn method(name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|m| m.name == name)
}

/// The model tools of contract B (`agent_*`).
pub fn tools() -> impl Iterator<Item = &'static str> {
    METHODS.iter().filter(|m| m.tool).map(|m| m.name)
}

fn bad(method: &Method, what: String) -> Error {
    Error::invalid(format!(
        "{}: {what}. Repair: send params shaped like {}.",
        method.name, method.shape
    ))
}

fn string_field(method: &Method, p: &Map<String, Value>, name: &str) -> Result<Option<String>> {
    match p.get(name) {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(bad(
            method,
            format!("{name} must be a string, got {}", type_name(other)),
        )),
    }
}

fn required_string(method: &Method, p: &Map<String, Value>, name: &str) -> Result<String> {
    string_field(method, p, name)?.ok_or_else(|| bad(method, format!("{name} is required")))
}

fn integer_field(
    method: &Method,
    p: &Map<String, Value>,
    name: &str,
    min: u64,
    max: u64,
) -> Result<Option<u64>> {
    match p.get(name) {
        None => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(bad(
                method,
                format!(
                    "{name} must be an integer from {min} to {max}, got {}",
                    short_json(v)
                ),
            )),
        },
    }
}

/// A report-only `timeoutMs` (agent_spawn, agent_steer): an integer from 30,000 to 300,000,
/// else the original's error text.
fn report_timeout(method: &Method, p: &Map<String, Value>) -> Result<Option<u64>> {
    let Some(v) = p.get("timeoutMs") else {
        return Ok(None);
    };
    let (lo, hi) = REPORT_TIMEOUT_MS;
    match v.as_u64() {
        Some(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
        _ => Err(Error::invalid(format!(
            "{REPORT_TIMEOUT_INVALID}. Repair: {}'s timeoutMs is a report-only timer (the child is never stopped); pass a whole number of milliseconds from {lo} to {hi}, or leave it out (got {}).",
            method.name,
            short_json(v)
        ))),
    }
}

fn short_json(v: &Value) -> String {
    let text = v.to_string();
    if utf16_len(&text) > 60 {
        format!("{}…", utf16_prefix(&text, 60))
    } else {
        text
    }
}

/// Validates one `agent_*` request strictly: params is an object, unknown fields are refused,
/// every field has its type and range.
pub fn parse(method: &Method, params: &Value) -> Result<AgentRequest> {
    let p = match params {
        Value::Object(m) => m,
        Value::Null => &Map::new(),
        other => {
            return Err(bad(
                method,
                format!("params must be an object, got {}", type_name(other)),
            ))
        }
    };
    if let Some(extra) = p.keys().find(|k| !method.fields.contains(&k.as_str())) {
        return Err(bad(
            method,
            format!(
                "unknown field {} (accepted: {})",
                crate::paths::json_quote(extra),
                method.fields.join(", ")
            ),
        ));
    }
    (method.parse)(method, p)
}

/// The stored facts of one contract B thread that a view shows, borrowed from its row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AgentFacts<'a> {
    pub path: &'a str,
    pub parent: Option<&'a str>,
    /// The agent type named at spawn (`agent_spawn`'s `type`).
    pub kind: &'a str,
    pub state: AgentState,
    pub task: &'a str,
    pub status: &'a str,
    pub output: Option<&'a str>,
    pub error: Option<&'a str>,
    pub session_file: Option<&'a str>,
    /// Epoch milliseconds.
    pub created_at: i64,
    pub updated_at: i64,
    /// What the thread spent, summed from Pi's per-message usage (`thread_usage`).
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
    /// The model the child runs with (`provider/model-id`) and its thinking level, when known.
    pub model: Option<&'a str>,
    pub thinking_level: Option<&'a str>,
    /// The key of the thread's cost ledger: its thread id, which no other thread ever has.
    pub cost_id: &'a str,
}

pub use crate::store::agents::AgentState;

/// A thread's view: what every tool answers with, with the original's fields in the order its
/// `ThreadView` declares them (0.19: `model`, `thinkingLevel`, `costUsd` and `costId` after the
/// tokens). `output` exists only in `completed` and is cut at 16,000 characters; the cut adds
/// `outputTruncated: true` last, where the original's `compact()` spread puts it.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentView<'a> {
    pub path: &'a str,
    pub parent: Option<&'a str>,
    /// Who the thread reports to: its parent, else the caller that spawned it (`/root`).
    pub owner: &'a str,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub state: AgentState,
    pub task: &'a str,
    pub status: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
    pub created_at: i64,
    pub updated_at: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_file: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_level: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_truncated: Option<bool>,
    /// Issue 33, a team database: a live thread's host whose lease ran out, and since when
    /// (`{hostId, since}`); absent otherwise, and on one host. Set by `agent_status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_unreachable: Option<&'a crate::store::hosts::Unreachable>,
    /// Issue 45: what needs the user about the thread (`{attention, since, detail}`, the view
    /// `thread_attention`'s word: asking, failed, stalled, unreachable, owner_gone); absent
    /// when nothing does. Set by `agent_status`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attention: Option<&'a crate::store::attention::Need>,
    /// Issue 48: `agent_spawn` with isolation asked for (`THREADBASE_ISOLATION=worktree` or
    /// the type's `"isolation": "worktree"`) whose directory is not in a git work tree: why the
    /// thread runs without a worktree. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub isolation_note: Option<&'a str>,
}

/// The view of `f`.
pub fn view<'a>(f: &AgentFacts<'a>) -> AgentView<'a> {
    let (output, output_truncated) = if f.state == AgentState::Completed {
        let out = f.output.unwrap_or("");
        if utf16_len(out) > VIEW_OUTPUT_CHARS {
            (Some(utf16_prefix(out, VIEW_OUTPUT_CHARS)), Some(true))
        } else {
            (Some(out), None)
        }
    } else {
        (None, None)
    };
    AgentView {
        path: f.path,
        parent: f.parent,
        owner: f.parent.unwrap_or(crate::paths::ROOT),
        kind: f.kind,
        state: f.state,
        task: f.task,
        status: f.status,
        output,
        error: f.error,
        created_at: f.created_at,
        updated_at: f.updated_at,
        session_file: f.session_file,
        input_tokens: Some(f.input_tokens),
        output_tokens: Some(f.output_tokens),
        model: f.model,
        thinking_level: f.thinking_level,
        cost_usd: Some(f.cost_usd),
        cost_id: Some(f.cost_id),
        output_truncated,
        host_unreachable: None,
        attention: None,
        isolation_note: None,
    }
}

/// `agent_status {path: "/root"}` from the root: the original's pseudo-view of the main
/// session (`createdAt` 0, `updatedAt` now).
pub fn main_session_view(now_ms: i64) -> AgentView<'static> {
    AgentView {
        path: crate::paths::ROOT,
        parent: None,
        owner: crate::paths::ROOT,
        kind: "main",
        state: AgentState::Running,
        task: "Main Pi session",
        status: "main",
        output: None,
        error: None,
        created_at: 0,
        updated_at: now_ms,
        session_file: None,
        input_tokens: None,
        output_tokens: None,
        model: None,
        thinking_level: None,
        cost_usd: None,
        cost_id: None,
        output_truncated: None,
        host_unreachable: None,
        attention: None,
        isolation_note: None,
    }
}

/// `/agents reap`'s details: how many threads were (or, in a dry run, would be) forgotten,
/// and their paths, oldest first.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReapResult<'a> {
    pub dry_run: bool,
    pub count: usize,
    pub threads: Vec<&'a str>,
}

/// `agent_pause`'s details: the caller, `pauseRequested: true` and its new status.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Paused<'a> {
    pub path: &'a str,
    pub pause_requested: bool,
    pub status: &'a str,
}

/// `{content: [{type: "text", text: <pretty JSON>}], details}`, like every contract B result,
/// plus `terminate: true` for `agent_pause`. The details are serialized once for each form.
pub fn tool_result(
    w: &mut dyn std::io::Write,
    details: &impl Serialize,
    terminate: bool,
) -> Result<()> {
    let text = serde_json::to_string_pretty(details)?;
    let mut result = super::ToolResult::new(text, details);
    result.terminate = terminate;
    Ok(serde_json::to_writer(w, &result)?)
}

/// The notice a parent gets when a child settles: the final answer, or the state and status
/// with the original's closing sentence (a failed thread's status is its error).
pub fn settled_notice(path: &str, state: AgentState, status: &str, output: Option<&str>) -> String {
    match state {
        AgentState::Completed => {
            let out = output.unwrap_or("");
            if utf16_len(out) > VIEW_OUTPUT_CHARS {
                format!(
                    "Agent {path} completed. Final answer:\n{}\n{OUTPUT_TRUNCATED_NOTE}",
                    utf16_prefix(out, VIEW_OUTPUT_CHARS)
                )
            } else {
                format!("Agent {path} completed. Final answer:\n{out}")
            }
        }
        AgentState::Paused => format!(
            "Agent {path} is paused: {status}. No answer handback; send input to resume the same session."
        ),
        other => format!(
            "Agent {path} is {}: {status}. Session retained for further input.",
            other.as_str()
        ),
    }
}

/// A timeout notice's `recentOutput`: the text of the last [`RECENT_MESSAGES`] assistant
/// messages among a session's last [`RECENT_ENTRIES`] entries, joined by `\n---\n`, its last
/// [`RECENT_OUTPUT_CHARS`] characters (UTF-16 units, a surrogate pair kept whole).
pub fn recent_output(entries: &[Value]) -> String {
    let tail = &entries[entries.len().saturating_sub(RECENT_ENTRIES)..];
    let texts: Vec<String> = tail
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .filter_map(|e| crate::pi::session::content_text(&e["message"]["content"], ""))
        .filter(|t| !t.is_empty())
        .collect();
    let joined = texts[texts.len().saturating_sub(RECENT_MESSAGES)..].join("\n---\n");
    crate::text::utf16_suffix(&joined, RECENT_OUTPUT_CHARS).to_string()
}

/// The text of a timeout notice: the thread keeps running; what it said last follows.
pub fn timeout_notice(path: &str, timeout_ms: i64, recent_output: &str) -> String {
    let head = format!(
        "Agent {path} is still running after its timeout of {timeout_ms} ms; it was not stopped (agent_wait, agent_steer or agent_stop it)."
    );
    if recent_output.is_empty() {
        head
    } else {
        format!("{head} Recent output:\n{recent_output}")
    }
}

/// The one notice of the final recap (`finalRecap`): every held result, in the order they
/// came, and the request for a single summary turn.
pub fn recap_notice(results: &[&str]) -> String {
    format!(
        "All detached subagents have reported ({} result{}).\n\n{}\n\nSummarize these results in one reply.",
        results.len(),
        if results.len() == 1 { "" } else { "s" },
        results.join("\n\n")
    )
}

/// The notice a parent gets from `agent_update`.
pub fn progress_notice(path: &str, message: &str) -> String {
    format!("Progress from {path}: {message}")
}

/// `agent_output`'s details: a page of a completed thread's output, in UTF-16 units.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OutputPage<'a> {
    pub path: &'a str,
    pub text: &'a str,
    pub total_characters: usize,
    pub next_offset: Option<usize>,
}

/// A page of a completed thread's output, in UTF-16 units: `limit` units from `offset`
/// (nothing past the end), and the offset of the next page while there is more. A page never
/// ends inside a surrogate pair (the original's `slice` may); it then ends one unit early and
/// `nextOffset` says where the next one starts.
pub fn output_page<'a>(
    path: &'a str,
    output: &'a str,
    offset: usize,
    limit: usize,
) -> OutputPage<'a> {
    let total = utf16_len(output);
    let start = offset.min(total);
    let rest = crate::text::utf16_suffix(output, total - start);
    let text = utf16_prefix(rest, limit);
    // `rest` starts after a pair that `offset` falls inside.
    let end = total - utf16_len(rest) + utf16_len(text);
    OutputPage {
        path,
        text,
        total_characters: total,
        next_offset: (end < total).then_some(end),
    }
}

#[cfg(test)]
mod tests;
