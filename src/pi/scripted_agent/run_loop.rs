//! The run loop: a worker thread plays each run from the script, so the reader stays free to
//! answer commands (aborts, steering, `get_state`) while events stream, as in Pi.
//!
//! - Event order and shapes of §5: `agent_start`, `turn_start`, (system), user `message_start/end`,
//!   assistant `message_start`, delta-only `message_update`s, `message_end`,
//!   `tool_execution_start/update/end` (`durationMs`), `toolResult` messages, `turn_end
//!   {message, toolResults}`, `agent_end {messages, willRetry:false}`, `agent_settled`.
//! - `abort` stops the run promptly wherever it is: a streaming message ends with what was streamed
//!   and `stopReason:"aborted"`, `errorMessage:"Request was aborted"`; a running tool ends with
//!   `isError:true` "Operation aborted", then an empty aborted assistant message follows in a new
//!   turn, as Pi's loop does; an open dialog resolves as cancelled. `agent_end` and
//!   `agent_settled {aborted:true}` come before the `abort` response. Queues are kept.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::dispatch::response;
use super::script::{Action, Msg, ToolSpec};
use super::{write_stderr, Shared, UserInput};

pub(super) fn worker(sh: &Arc<Shared>) {
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
            Action::Write { path, content } => {
                let (path, content) = (self.fill(&path), self.fill(&content));
                let file = std::path::Path::new(&path);
                let written = file
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .map_or(Ok(()), std::fs::create_dir_all)
                    .and_then(|()| std::fs::write(file, content));
                if let Err(e) = written {
                    write_stderr(&format!("scripted-agent: cannot write {path}: {e}"));
                }
                false
            }
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

pub(super) fn uuid_v4() -> String {
    uuid::Uuid::new_v4().to_string()
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
}
