//! Pi 1.6 RPC events → compact lifecycle events and phases (contract A §1.8–1.9). Pure, so
//! the rules are tested without processes.

use serde_json::{json, Value};

use crate::pi::events::{self, read};
use crate::store::usage::Usage;
use crate::text::{byte_suffix, retain};

/// How often a child's activity is recorded at most ([`Tracker::activity_due`]).
pub const ACTIVITY_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Retained assistant text, in UTF-16 units.
pub const RETAINED_TEXT_CHARS: usize = 100_000;
/// `assistant_message.text` is a byte tail of this many bytes.
pub const EVENT_TEXT_BYTES: usize = 2_000;

pub use crate::domain::Phase;

/// What the runtime should do about one child event.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Record a lifecycle event.
    Event(&'static str, Value),
    /// The phase changed.
    Phase(Phase),
    /// A complete assistant message (retained text).
    AssistantText(String),
    /// Streamed assistant text to add to the partial text.
    PartialDelta(String),
    /// Answer this dialog request `cancelled: true`.
    CancelUi(String),
    /// Ask the parent this dialog (`THREADBASE_UI=parent`): the child waits for its answer.
    AskUi(Dialog),
    /// The turn-open flag changed.
    TurnOpen(bool),
    /// A `get_state` answer's `sessionName` and `pendingMessageCount` (the runtime's reader
    /// adds it beside [`Tracker::on_state`]'s effects).
    SessionState {
        name: Option<String>,
        pending: Option<i64>,
    },
    /// The last turn ended in an error (its first line), or a new turn began after one that
    /// did (`None`): `thread_output.turn_error`, what the view `thread_attention` reads as
    /// `failed` while the thread is live and idle.
    TurnError(Option<String>),
    /// Spend to add to the thread's: a completed assistant message's usage (one turn, its
    /// tool calls), or the usage Pi 1.6 reports beside turns (a tool result's nested model
    /// calls, a `usage` session entry, a compaction), as its session cost counts them.
    Usage(Usage),
}

pub use crate::pi::events::Dialog;

/// Per-child state the mapping needs.
#[derive(Debug, Clone)]
pub struct Tracker {
    pub phase: Phase,
    pub turn_open: bool,
    /// Set when an initial prompt was accepted: idle-looking refreshes keep the thread busy
    /// until real activity is seen.
    pub awaiting_activity: bool,
    /// A run has started at least once (a starting thread with no run stays starting).
    pub seen_run: bool,
    /// The launch sends an initial prompt, so a starting thread with no run waits for its
    /// answer. A launch without one (resume, fork) has nothing to wait for: Pi 1.6 sends no
    /// event then, and its first idle `get_state` answer is what makes it idle.
    pub prompted: bool,
    /// Prompts written to the child and not answered yet. Pi 1.6 answers `get_state` at once
    /// but a prompt only after an asynchronous preflight, so a refresh written after a send
    /// can be answered before it, looking idle although a run is about to start.
    pub unanswered_prompts: u32,
    /// `THREADBASE_UI=parent`: dialogs are asked of the parent instead of cancelled.
    pub ask_parent: bool,
    /// The last turn ended in an error (and no turn began since).
    pub turn_failed: bool,
    /// When the child's last line was recorded as activity ([`Tracker::activity_due`]).
    pub activity_at: Option<std::time::Instant>,
    /// The session name and pending message count last recorded from a `get_state` answer
    /// ([`Tracker::session_state`]): an answer that says the same writes nothing.
    pub session_state: Option<(Option<String>, Option<i64>)>,
}

impl Tracker {
    /// The tracker of a launch that sends an initial prompt.
    pub fn new() -> Self {
        Tracker {
            phase: Phase::Starting,
            turn_open: false,
            awaiting_activity: false,
            seen_run: false,
            prompted: true,
            unanswered_prompts: 0,
            ask_parent: false,
            turn_failed: false,
            activity_at: None,
            session_state: None,
        }
    }

    /// The tracker of a launch that sends no prompt (resume, fork).
    pub fn without_prompt() -> Self {
        Tracker {
            prompted: false,
            ..Tracker::new()
        }
    }

    fn set_phase(&mut self, phase: Phase, out: &mut Vec<Effect>) {
        if self.phase != Phase::Stopping && self.phase != phase {
            self.phase = phase;
            out.push(Effect::Phase(phase));
        }
    }

    /// A run or a turn begins: a failure of the one before is over.
    fn clear_turn_error(&mut self, out: &mut Vec<Effect>) {
        if self.turn_failed {
            self.turn_failed = false;
            out.push(Effect::TurnError(None));
        }
    }

    fn close_turn(&mut self, out: &mut Vec<Effect>) {
        if self.turn_open {
            self.turn_open = false;
            out.push(Effect::TurnOpen(false));
            out.push(Effect::Event("turn_completed", json!({})));
        }
    }

    /// Maps one event line (not a response) from the child.
    pub fn on_event(&mut self, v: &Value) -> Vec<Effect> {
        let mut out = Vec::new();
        let kind = events::kind(v);
        if !matches!(
            kind,
            "extension_ui_request" | "queue_update" | "session_info_changed"
        ) {
            self.awaiting_activity = false;
        }
        match kind {
            "agent_start" => {
                self.seen_run = true;
                self.clear_turn_error(&mut out);
                self.set_phase(Phase::Busy, &mut out);
            }
            "turn_start" => {
                self.clear_turn_error(&mut out);
                self.set_phase(Phase::Busy, &mut out);
                if !self.turn_open {
                    self.turn_open = true;
                    out.push(Effect::TurnOpen(true));
                    out.push(Effect::Event("turn_started", json!({})));
                }
            }
            // A message inside a run. A message that starts no turn (a custom message such as a
            // notice delivered into an idle session: Pi 1.6 emits its message_start and
            // message_end with no agent_start) leaves an idle thread idle.
            "message_start" => {
                let role = read::<events::MessageEnd>(v)
                    .and_then(|m| m.message)
                    .and_then(|m| m.role);
                if role == Some("assistant") {
                    self.set_phase(Phase::Busy, &mut out);
                }
            }
            "message_update" => {
                let update = read::<events::MessageUpdate>(v).and_then(|u| u.event);
                if let Some(events::StreamEvent {
                    kind: Some("text_delta"),
                    delta: Some(d),
                }) = update
                {
                    out.push(Effect::PartialDelta(d.to_string()));
                }
            }
            "message_end" => {
                if let Some(msg) = read::<events::MessageEnd>(v).and_then(|e| e.message) {
                    if let Some(error) = on_message_end(&msg, &mut out) {
                        self.turn_failed = true;
                        out.push(Effect::TurnError(Some(error)));
                    }
                }
            }
            "tool_execution_start" => {
                self.set_phase(Phase::Busy, &mut out);
                let (tool_name, args) = read::<events::ToolExecutionStart>(v)
                    .map_or((Value::Null, None), |e| (e.tool_name, e.args));
                let mut data = json!({"toolName": tool_name});
                if let Some(args) = args.filter(|a| !a.is_null()) {
                    data["args"] = Value::String(tool_args_text(&args));
                }
                out.push(Effect::Event("tool_started", data));
            }
            "tool_execution_end" => {
                let (tool_name, error) = read::<events::ToolExecutionEnd>(v)
                    .map_or((Value::Null, None), |e| (e.tool_name, e.is_error));
                out.push(Effect::Event(
                    "tool_completed",
                    json!({"toolName": tool_name, "error": error.unwrap_or(false)}),
                ));
            }
            "entry_appended" => {
                let entry = read::<events::EntryAppended>(v).and_then(|e| e.entry);
                if let Some(entry) = entry.filter(|e| e.kind == Some("usage")) {
                    push_spend(entry.usage, &mut out);
                }
            }
            "compaction_end" => {
                let result = read::<events::CompactionEnd>(v).and_then(|e| e.result);
                push_spend(result.and_then(|r| r.usage), &mut out);
            }
            "turn_end" => self.close_turn(&mut out),
            "agent_end" => self.close_turn(&mut out),
            "agent_settled" => {
                self.close_turn(&mut out);
                self.set_phase(Phase::Idle, &mut out);
            }
            "extension_ui_request" => {
                let req = read::<events::ExtensionUiRequest>(v);
                let dialog = req.as_ref().is_some_and(|r| r.is_dialog());
                let asked = match (&req, self.ask_parent && dialog) {
                    (Some(r), true) => r.dialog(),
                    _ => None,
                };
                let (method, id, title) = match req {
                    Some(r) => (r.method.unwrap_or(""), r.id, r.title),
                    None => ("", None, Value::Null),
                };
                if let Some(d) = asked {
                    out.push(Effect::AskUi(d));
                    out.push(Effect::Event(
                        "ui_request",
                        json!({"method": method, "title": title, "autoCancelled": false, "askedParent": true}),
                    ));
                    return out;
                }
                let cancel = dialog && id.is_some();
                if let (true, Some(id)) = (cancel, id) {
                    out.push(Effect::CancelUi(id.to_string()));
                }
                out.push(Effect::Event(
                    "ui_request",
                    json!({"method": method, "title": title, "autoCancelled": cancel}),
                ));
            }
            "extension_error" => {
                let e = read::<events::ExtensionError>(v);
                let m = format!(
                    "Extension error in {}: {}",
                    e.as_ref().and_then(|e| e.extension_path).unwrap_or("?"),
                    e.as_ref().and_then(|e| e.error).unwrap_or("?")
                );
                out.push(Effect::Event("thread_error", json!({"message": m})));
            }
            _ => {}
        }
        out
    }

    /// The child said something at `now`: whether to record it as its activity
    /// (`thread_output.activity_at`, what the view reads a stall from). At most once per
    /// [`ACTIVITY_EVERY`], so a streaming child costs one small write a second; a stall is
    /// judged in minutes.
    pub fn activity_due(&mut self, now: std::time::Instant) -> bool {
        if self
            .activity_at
            .is_some_and(|t| now.duration_since(t) < ACTIVITY_EVERY)
        {
            return false;
        }
        self.activity_at = Some(now);
        true
    }

    /// Records that a prompt is about to be written (see [`Tracker::unanswered_prompts`]).
    pub fn on_prompt_written(&mut self) {
        self.unanswered_prompts += 1;
    }

    /// Applies the child's answer to a `prompt`: a run that started makes the thread busy
    /// until activity is seen; a rejected prompt leaves a starting thread idle.
    pub fn on_prompt_answer(&mut self, response: &Value) -> Vec<Effect> {
        let mut out = Vec::new();
        self.unanswered_prompts = self.unanswered_prompts.saturating_sub(1);
        if response["success"].as_bool().unwrap_or(false) {
            let disposition = response["data"]["disposition"]
                .as_str()
                .unwrap_or("started");
            if disposition == "started" && self.phase != Phase::Stopping {
                self.awaiting_activity = true;
                self.seen_run = true;
                self.set_phase(Phase::Busy, &mut out);
            }
        } else if self.phase == Phase::Starting {
            self.set_phase(Phase::Idle, &mut out);
        }
        out
    }

    /// A `get_state` answer's `sessionName` and `pendingMessageCount`, to record when they
    /// differ from what the last answer recorded (issue 46: a poll or a wait refresh of an
    /// unchanged child writes nothing).
    pub fn session_state(&mut self, state: &Value) -> Option<Effect> {
        let now = (
            state["sessionName"].as_str().map(str::to_string),
            state["pendingMessageCount"].as_i64(),
        );
        if self.session_state.as_ref() == Some(&now) {
            return None;
        }
        self.session_state = Some(now.clone());
        Some(Effect::SessionState {
            name: now.0,
            pending: now.1,
        })
    }

    /// Applies a `get_state` answer: busy when streaming, compacting or holding pending
    /// messages; idle otherwise, unless an accepted initial prompt has shown no activity yet
    /// or a starting thread has done nothing since a prompt it has not answered. An idle
    /// refresh closes a turn whose end events were missed. Returns the effects and whether
    /// the refresh reads idle.
    pub fn on_state(&mut self, state: &Value) -> (Vec<Effect>, bool) {
        let mut out = Vec::new();
        let busy = state["isStreaming"].as_bool().unwrap_or(false)
            || state["isCompacting"].as_bool().unwrap_or(false)
            || state["pendingMessageCount"].as_u64().unwrap_or(0) > 0;
        if busy {
            self.set_phase(Phase::Busy, &mut out);
            return (out, false);
        }
        if self.awaiting_activity || self.unanswered_prompts > 0 || self.phase == Phase::Stopping {
            return (out, false);
        }
        if self.phase == Phase::Starting && self.prompted && !self.seen_run {
            return (out, false);
        }
        self.close_turn(&mut out);
        self.set_phase(Phase::Idle, &mut out);
        (out, true)
    }
}

impl Default for Tracker {
    fn default() -> Self {
        Self::new()
    }
}

/// The effects of a finished message: its spend, and an assistant message's text or error.
/// Returns the first line of an assistant message's error (its turn failed).
fn on_message_end(msg: &events::Message, out: &mut Vec<Effect>) -> Option<String> {
    let mut failed = None;
    match msg.role {
        Some("toolResult") => {
            // threadbase's own tools report the spend of the threads below, which their rows
            // count already.
            let ours = msg
                .tool_name
                .is_some_and(|t| events::THREADBASE_TOOLS.contains(&t));
            if let Some(u) = msg.usage.as_ref().filter(|_| !ours) {
                out.push(Effect::Usage(Usage::of_pi(u)));
            }
        }
        Some("assistant") => {
            out.push(Effect::Usage(Usage::of_message(msg)));
            let text = msg.text();
            if msg.stop_reason == Some("error") {
                let m = msg.error_message.unwrap_or("The model returned an error.");
                out.push(Effect::Event("thread_error", json!({"message": m})));
                let first = m.lines().find(|l| !l.trim().is_empty()).unwrap_or(m).trim();
                failed = Some(crate::text::truncate_ellipsis(first, 500));
            }
            if !text.trim().is_empty() {
                out.push(Effect::Event(
                    "assistant_message",
                    json!({"text": byte_suffix(&text, EVENT_TEXT_BYTES)}),
                ));
                out.push(Effect::AssistantText(retain(&text, RETAINED_TEXT_CHARS)));
            }
        }
        _ => {}
    }
    failed
}

/// Spend reported beside turns (a `usage` entry, a compaction), unless it is nothing.
fn push_spend(usage: Option<events::Usage>, out: &mut Vec<Effect>) {
    let u = Usage::of_pi(&usage.unwrap_or_default());
    if !u.is_zero() {
        out.push(Effect::Usage(u));
    }
}

/// The text blocks of an assistant message, joined by newlines.
pub fn assistant_text(msg: &Value) -> String {
    read::<events::Message>(msg)
        .map(|m| m.text())
        .unwrap_or_default()
}

/// A `tool_started` event keeps at most this many characters of the call's arguments (their
/// compact JSON text; longer ones end with `…`): enough for a command line or a file path, not
/// a whole file an edit writes. The event's `args` is for people reading the rows
/// (`threadbase events`); a snapshot's `recentEvents` leaves it out, as pi-threads has no such
/// member.
pub const TOOL_ARGS_CHARS: usize = 300;

fn tool_args_text(args: &Value) -> String {
    let text = args.to_string();
    match text.char_indices().nth(TOOL_ARGS_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `get_state` answer is recorded only when its session name or pending count differs
    /// from the last one recorded (issue 46: a poll or wait refresh of an unchanged child
    /// writes nothing).
    #[test]
    fn an_unchanged_state_answer_records_nothing() {
        let mut t = Tracker::new();
        let state = json!({"sessionName": "a", "pendingMessageCount": 0});
        assert!(matches!(
            t.session_state(&state),
            Some(Effect::SessionState { name: Some(ref n), pending: Some(0) }) if n == "a"
        ));
        assert!(t.session_state(&state).is_none());
        assert!(t
            .session_state(&json!({"sessionName": "a", "pendingMessageCount": 1}))
            .is_some());
        assert!(t
            .session_state(&json!({"pendingMessageCount": 1}))
            .is_some());
        assert!(t
            .session_state(&json!({"pendingMessageCount": 1}))
            .is_none());
    }

    /// The arguments are recorded as their JSON text, cut at TOOL_ARGS_CHARS characters.
    #[test]
    fn tool_started_records_the_calls_arguments_cut() {
        let mut t = Tracker::new();
        let long = "é".repeat(400);
        let effects = run(
            &mut t,
            &[
                json!({"type":"tool_execution_start","toolName":"bash","args":{"command":"ls -la"}}),
                json!({"type":"tool_execution_start","toolName":"write","args":{"content": long}}),
                json!({"type":"tool_execution_start","toolName":"noargs"}),
            ],
        );
        let data: Vec<&Value> = effects
            .iter()
            .filter_map(|e| match e {
                Effect::Event("tool_started", d) => Some(d),
                _ => None,
            })
            .collect();
        assert_eq!(
            *data[0],
            json!({"toolName": "bash", "args": "{\"command\":\"ls -la\"}"})
        );
        let cut = data[1]["args"].as_str().unwrap();
        assert_eq!(cut.chars().count(), TOOL_ARGS_CHARS + 1);
        assert!(cut.starts_with("{\"content\":\"éé") && cut.ends_with('…'));
        assert_eq!(*data[2], json!({"toolName": "noargs"}));
    }

    /// A notice delivered into an idle session (a custom message that starts no turn: Pi 1.6
    /// emits its message_start and message_end, no agent_start) leaves the thread idle; a
    /// provider error marks the turn failed until the next turn starts.
    #[test]
    fn a_message_that_starts_no_turn_leaves_an_idle_thread_idle_and_an_error_fails_the_turn() {
        let mut t = Tracker::new();
        t.phase = Phase::Idle;
        let effects = run(
            &mut t,
            &[
                json!({"type":"message_start","message":{"role":"custom","customType":"threadbase-notice"}}),
                json!({"type":"message_end","message":{"role":"custom","customType":"threadbase-notice"}}),
            ],
        );
        assert!(
            !effects.iter().any(|e| matches!(e, Effect::Phase(_))),
            "{effects:?}"
        );
        assert_eq!(t.phase, Phase::Idle);
        let effects = run(
            &mut t,
            &[
                json!({"type":"agent_start"}),
                json!({"type":"turn_start"}),
                json!({"type":"message_start","message":{"role":"assistant"}}),
                json!({"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"500 upstream overloaded\nmore"}}),
                json!({"type":"turn_end"}),
                json!({"type":"agent_end"}),
                json!({"type":"agent_settled"}),
            ],
        );
        assert!(
            effects.contains(&Effect::TurnError(Some("500 upstream overloaded".into()))),
            "{effects:?}"
        );
        assert_eq!(t.phase, Phase::Idle);
        let effects = run(&mut t, &[json!({"type":"agent_start"})]);
        assert_eq!(effects.first(), Some(&Effect::TurnError(None)));
    }

    fn run(t: &mut Tracker, lines: &[Value]) -> Vec<Effect> {
        lines.iter().flat_map(|l| t.on_event(l)).collect()
    }

    #[test]
    fn one_prompt_with_a_tool_call() {
        let mut t = Tracker::new();
        t.awaiting_activity = true;
        let effects = run(
            &mut t,
            &[
                json!({"type":"agent_start"}),
                json!({"type":"turn_start"}),
                json!({"type":"message_start","message":{"role":"assistant"}}),
                json!({"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"Hel"}}),
                json!({"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"Hello"}],"stopReason":"toolUse"}}),
                json!({"type":"tool_execution_start","toolName":"bash"}),
                json!({"type":"tool_execution_end","toolName":"bash","isError":false}),
                json!({"type":"turn_end"}),
                json!({"type":"turn_start"}),
                json!({"type":"turn_end"}),
                json!({"type":"agent_end"}),
                json!({"type":"agent_settled"}),
            ],
        );
        let kinds: Vec<&str> = effects
            .iter()
            .filter_map(|e| {
                if let Effect::Event(k, _) = e {
                    Some(*k)
                } else {
                    None
                }
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "turn_started",
                "assistant_message",
                "tool_started",
                "tool_completed",
                "turn_completed",
                "turn_started",
                "turn_completed"
            ]
        );
        assert!(effects.contains(&Effect::Phase(Phase::Busy)));
        assert_eq!(effects.last(), Some(&Effect::Phase(Phase::Idle)));
        assert!(effects.contains(&Effect::PartialDelta("Hel".into())));
        assert!(!t.awaiting_activity);
    }

    /// What Pi 1.6 counts in its session cost (`get_session_stats`): assistant messages,
    /// tool results with nested usage, `usage` entries and compactions; except the usage of
    /// threadbase's own tools' results (the spend of the threads below, in their own rows).
    #[test]
    fn spend_is_every_usage_pi_reports() {
        let usage = |n: i64| {
            json!({"input": n, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": n + 1,
                   "cost": {"total": 0.5}})
        };
        let mut t = Tracker::new();
        let spent: Vec<Usage> = [
            json!({"type":"message_end","message":{"role":"assistant","usage":usage(10),
                   "content":[{"type":"toolCall","id":"c","name":"bash","arguments":{}}],"stopReason":"toolUse"}}),
            json!({"type":"message_end","message":{"role":"toolResult","toolCallId":"c","usage":usage(20),"content":[]}}),
            json!({"type":"message_end","message":{"role":"toolResult","toolCallId":"d","content":[]}}),
            // threadbase's own tool: its children's spend, which their rows count.
            json!({"type":"message_end","message":{"role":"toolResult","toolCallId":"e","toolName":"thread","usage":usage(50),"content":[]}}),
            json!({"type":"entry_appended","entry":{"type":"usage","kind":"cache_warm","usage":usage(30)}}),
            json!({"type":"entry_appended","entry":{"type":"custom","data":{"usage":usage(99)}}}),
            json!({"type":"compaction_end","reason":"threshold","result":{"summary":"s","usage":usage(40)}}),
            json!({"type":"compaction_end","reason":"overflow","errorMessage":"failed"}),
            json!({"type":"message_end","message":{"role":"user","content":"hi"}}),
        ]
        .iter()
        .flat_map(|e| t.on_event(e))
        .filter_map(|e| match e {
            Effect::Usage(u) => Some(u),
            _ => None,
        })
        .collect();
        let inputs: Vec<(i64, i64, i64)> = spent
            .iter()
            .map(|u| (u.input_tokens, u.turns, u.tool_calls))
            .collect();
        assert_eq!(inputs, [(10, 1, 1), (20, 0, 0), (30, 0, 0), (40, 0, 0)]);
        assert!(spent
            .iter()
            .all(|u| u.cost_usd == 0.5 && u.output_tokens == 1));
    }

    #[test]
    fn with_ask_parent_dialogs_are_asked_and_notifications_still_recorded() {
        let mut t = Tracker {
            ask_parent: true,
            ..Tracker::new()
        };
        let e = t.on_event(
            &json!({"type":"extension_ui_request","id":"u1","method":"select",
            "title":"Pick","message":"one","options":["A","B"]}),
        );
        assert_eq!(
            e[0],
            Effect::AskUi(Dialog {
                id: "u1".into(),
                kind: crate::domain::QuestionKind::Select,
                title: Some("Pick".into()),
                message: Some("one".into()),
                options: Some(vec!["A".into(), "B".into()]),
            })
        );
        let e = t.on_event(
            &json!({"type":"extension_ui_request","id":"u2","method":"notify","message":"hi"}),
        );
        assert_eq!(
            e,
            vec![Effect::Event(
                "ui_request",
                json!({"method":"notify","title":null,"autoCancelled":false})
            )]
        );
        // A dialog without an id cannot be answered: nothing is asked.
        let e = t.on_event(&json!({"type":"extension_ui_request","method":"confirm"}));
        assert!(!e.iter().any(|e| matches!(e, Effect::AskUi(_))), "{e:?}");
    }

    #[test]
    fn dialogs_are_cancelled_and_notifications_recorded() {
        let mut t = Tracker::new();
        let e = t.on_event(
            &json!({"type":"extension_ui_request","id":"u1","method":"confirm","title":"Sure?"}),
        );
        assert_eq!(e[0], Effect::CancelUi("u1".into()));
        assert_eq!(
            e[1],
            Effect::Event(
                "ui_request",
                json!({"method":"confirm","title":"Sure?","autoCancelled":true})
            )
        );
        let e = t.on_event(
            &json!({"type":"extension_ui_request","id":"u2","method":"notify","message":"hi"}),
        );
        assert_eq!(
            e,
            vec![Effect::Event(
                "ui_request",
                json!({"method":"notify","title":null,"autoCancelled":false})
            )]
        );
    }

    #[test]
    fn refresh_rules() {
        let mut t = Tracker::new();
        // A starting thread that has done nothing stays starting.
        assert_eq!(
            t.on_state(&json!({"isStreaming":false,"pendingMessageCount":0})),
            (vec![], false)
        );
        t.phase = Phase::Busy;
        t.awaiting_activity = true;
        assert!(
            !t.on_state(&json!({"isStreaming":false})).1,
            "accepted prompt stays busy until activity"
        );
        t.awaiting_activity = false;
        t.turn_open = true;
        let (e, idle) = t.on_state(&json!({"isStreaming":false,"pendingMessageCount":0}));
        assert!(idle);
        assert!(
            e.contains(&Effect::Event("turn_completed", json!({}))),
            "missed end events still close the turn"
        );
        let (_, idle) = t.on_state(&json!({"isStreaming":false,"pendingMessageCount":2}));
        assert!(!idle);
        assert_eq!(t.phase, Phase::Busy);
        t.phase = Phase::Stopping;
        t.on_event(&json!({"type":"agent_settled"}));
        assert_eq!(t.phase, Phase::Stopping, "stopping freezes the phase");
    }

    #[test]
    fn a_refresh_answered_before_a_prompt_does_not_read_idle() {
        // Pi 1.6 answers get_state at once and a prompt after its preflight: a refresh written
        // after a send can come back first, idle-looking.
        let mut t = Tracker::without_prompt();
        let idle_state = json!({"isStreaming":false,"pendingMessageCount":0});
        t.on_state(&idle_state);
        t.on_prompt_written();
        assert_eq!(t.on_state(&idle_state), (vec![], false));
        assert_eq!(t.phase, Phase::Idle, "no phase is made up either");
        t.on_prompt_answer(&json!({"success":false,"error":"No API key found"}));
        assert_eq!(
            t.on_state(&idle_state),
            (vec![], true),
            "answered: idle again"
        );
    }

    #[test]
    fn a_launch_without_a_prompt_is_idle_at_its_first_idle_refresh() {
        // Pi 1.6 sends no event after a resume or fork: the refreshes are all there is, and
        // each one (the launch's, then a wait's) must read idle.
        let mut t = Tracker::without_prompt();
        let idle_state = json!({"isStreaming":false,"isCompacting":false,"pendingMessageCount":0});
        assert_eq!(
            t.on_state(&idle_state),
            (vec![Effect::Phase(Phase::Idle)], true)
        );
        assert_eq!(
            t.on_state(&idle_state),
            (vec![], true),
            "a later refresh reads idle too"
        );
        // A message Pi still holds keeps it busy.
        let mut t = Tracker::without_prompt();
        let (e, idle) = t.on_state(&json!({"isStreaming":false,"pendingMessageCount":1}));
        assert_eq!((e, idle), (vec![Effect::Phase(Phase::Busy)], false));
        // A send to it then runs like any prompt: busy until the run settles.
        let mut t = Tracker::without_prompt();
        t.on_state(&idle_state);
        t.on_prompt_answer(&json!({"success":true,"data":{"disposition":"started"}}));
        assert_eq!((t.phase, t.on_state(&idle_state).1), (Phase::Busy, false));
        t.on_event(&json!({"type":"agent_start"}));
        t.on_event(&json!({"type":"agent_settled","aborted":false}));
        assert_eq!((t.phase, t.on_state(&idle_state).1), (Phase::Idle, true));
    }
}
