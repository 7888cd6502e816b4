//! Command dispatch: the reader thread answers every command at once, as Pi does, also while a
//! run plays, so the host's `get_state` refreshes and steering see Pi's timing.
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

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::{Shared, State, UserInput};
use crate::pi::flags::THINKING_LEVELS;

enum Reply {
    Ok(Option<Value>),
    Err(String),
    /// Answered later by someone else (abort waiting for the run to end).
    Deferred,
    /// Not a command: never answered.
    None,
}

impl Shared {
    pub(super) fn handle_line(self: &Arc<Self>, line: &[u8]) {
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
    pub(super) fn emit_queue_update(&self, st: &State, in_flight: &[UserInput]) {
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

pub(super) fn response(
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

#[cfg(test)]
mod tests {
    use super::*;

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
