//! Pi 1.6's stdout events (`reference/pi-rpc.md` §5), one struct per kind, holding the fields
//! threadbase reads, so each field's name and type is written once, here, instead of as a
//! string index wherever an event is looked at.
//!
//! They are read from the line's parsed object, after the codec's prefix check and lean parse
//! (`runtime::rpc`), and borrow its strings. They forgive what the runtime always forgave: a
//! field that is missing or of another type reads as absent, so one odd field never loses the
//! rest of an event.

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// Reads an event (or a part of one) from its parsed JSON; `None` when `v` is not an object.
pub(crate) fn read<'a, T: Deserialize<'a>>(v: &'a Value) -> Option<T> {
    T::deserialize(v).ok()
}

/// An event line's `type` (`""` when it has none).
pub fn kind(v: &Value) -> &str {
    v.get("type").and_then(Value::as_str).unwrap_or("")
}

/// A field that reads as `None` when it is not a `T`. Only for reading a parsed `Value`, where
/// a failed read consumes nothing and the object's other fields still read.
fn loose<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Ok(T::deserialize(d).ok())
}

/// `message_update`: a streamed piece of the assistant message.
#[derive(Debug, Deserialize)]
pub struct MessageUpdate<'a> {
    #[serde(
        rename = "assistantMessageEvent",
        default,
        borrow,
        deserialize_with = "loose"
    )]
    pub event: Option<StreamEvent<'a>>,
}

/// `message_update.assistantMessageEvent`: `text_delta`, `toolcall_end`, ….
#[derive(Debug, Deserialize)]
pub struct StreamEvent<'a> {
    #[serde(rename = "type", default, borrow, deserialize_with = "loose")]
    pub kind: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "loose")]
    pub delta: Option<&'a str>,
}

/// The tools threadbase's Pi extension registers (`pi-extension/tools.ts`: contract A's
/// `thread`, contract B's `agent_*`, contract C's `threads_*`). Their results' `usage` is the
/// spend of the threads below the session (serve's `--report-usage`), which those threads'
/// own rows count: a thread's spend leaves it out, or its parent's subtree would count it
/// twice.
pub const THREADBASE_TOOLS: [&str; 15] = [
    "thread",
    "agent_spawn",
    "agent_wait",
    "agent_steer",
    "agent_status",
    "agent_update",
    "agent_pause",
    "agent_stop",
    "agent_output",
    "threads_spawn",
    "threads_list",
    "threads_send",
    "threads_interrupt",
    "threads_hide",
    "threads_report",
];

/// `message_end`: a finished message.
#[derive(Debug, Deserialize)]
pub struct MessageEnd<'a> {
    #[serde(default, borrow, deserialize_with = "loose")]
    pub message: Option<Message<'a>>,
}

/// A message, as `message_end` carries it and a session file's `message` entry stores it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message<'a> {
    #[serde(default, borrow, deserialize_with = "loose")]
    pub role: Option<&'a str>,
    /// A tool result's tool.
    #[serde(default, borrow, deserialize_with = "loose")]
    pub tool_name: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "loose")]
    pub content: Option<Content<'a>>,
    /// Present when `usage` is an object.
    #[serde(default, deserialize_with = "loose")]
    pub usage: Option<Usage>,
    #[serde(default, borrow, deserialize_with = "loose")]
    pub stop_reason: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "loose")]
    pub error_message: Option<&'a str>,
}

impl Message<'_> {
    /// The text blocks joined by newlines (a string content as it is).
    pub fn text(&self) -> String {
        match &self.content {
            Some(Content::Text(s)) => (*s).to_string(),
            Some(Content::Blocks(blocks)) => blocks
                .iter()
                .filter(|b| b.kind == Some("text"))
                .filter_map(|b| b.text)
                .collect::<Vec<_>>()
                .join("\n"),
            None => String::new(),
        }
    }

    /// How many `toolCall` blocks it has.
    pub fn tool_calls(&self) -> usize {
        match &self.content {
            Some(Content::Blocks(blocks)) => {
                blocks.iter().filter(|b| b.kind == Some("toolCall")).count()
            }
            _ => 0,
        }
    }
}

/// A message's `content`: a string, or blocks.
#[derive(Debug)]
pub enum Content<'a> {
    Text(&'a str),
    /// An element that is not an object reads as a block of no type.
    Blocks(Vec<Block<'a>>),
}

/// A content block: `{"type":"text","text":…}`, `{"type":"toolCall",…}`, ….
#[derive(Debug, Default, Deserialize)]
pub struct Block<'a> {
    #[serde(rename = "type", default, borrow, deserialize_with = "loose")]
    pub kind: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "loose")]
    pub text: Option<&'a str>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Content<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ContentVisitor)
    }
}

struct ContentVisitor;

impl<'de> Visitor<'de> for ContentVisitor {
    type Value = Content<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string or an array of content blocks")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Content::Text(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(AnyBlock(b)) = seq.next_element()? {
            blocks.push(b.unwrap_or_default());
        }
        Ok(Content::Blocks(blocks))
    }
}

/// A content element, a block when it reads as one.
struct AnyBlock<'a>(Option<Block<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for AnyBlock<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        loose(d).map(AnyBlock)
    }
}

/// A usage object (`{input, output, cacheRead, cacheWrite, cost: {total}}`), on an assistant
/// message, a tool result (nested model calls), a `usage` entry or a compaction result.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    #[serde(default, deserialize_with = "loose")]
    pub input: Option<f64>,
    #[serde(default, deserialize_with = "loose")]
    pub output: Option<f64>,
    #[serde(default, deserialize_with = "loose")]
    pub cache_read: Option<f64>,
    #[serde(default, deserialize_with = "loose")]
    pub cache_write: Option<f64>,
    #[serde(default, deserialize_with = "loose")]
    pub cost: Option<Cost>,
}

/// `usage.cost`.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub struct Cost {
    #[serde(default, deserialize_with = "loose")]
    pub total: Option<f64>,
}

/// `tool_execution_start`.
#[derive(Debug, Deserialize)]
pub struct ToolExecutionStart {
    /// As written: the `tool_started` event records it verbatim.
    #[serde(rename = "toolName", default)]
    pub tool_name: Value,
    /// The call's arguments (`{"command": "ls"}` for bash): the `tool_started` event records
    /// their JSON text, cut.
    #[serde(default)]
    pub args: Option<Value>,
}

/// `tool_execution_end`.
#[derive(Debug, Deserialize)]
pub struct ToolExecutionEnd {
    /// As written: the `tool_completed` event records it verbatim.
    #[serde(rename = "toolName", default)]
    pub tool_name: Value,
    #[serde(rename = "isError", default, deserialize_with = "loose")]
    pub is_error: Option<bool>,
}

/// `entry_appended`: a session entry an extension appended.
#[derive(Debug, Deserialize)]
pub struct EntryAppended<'a> {
    #[serde(default, borrow, deserialize_with = "loose")]
    pub entry: Option<Entry<'a>>,
}

/// `entry_appended.entry`.
#[derive(Debug, Deserialize)]
pub struct Entry<'a> {
    #[serde(rename = "type", default, borrow, deserialize_with = "loose")]
    pub kind: Option<&'a str>,
    /// A `usage` entry's spend (a cache warm-up).
    #[serde(default, deserialize_with = "loose")]
    pub usage: Option<Usage>,
}

/// `compaction_end`.
#[derive(Debug, Deserialize)]
pub struct CompactionEnd {
    #[serde(default, deserialize_with = "loose")]
    pub result: Option<CompactionResult>,
}

/// `compaction_end.result`.
#[derive(Debug, Deserialize)]
pub struct CompactionResult {
    #[serde(default, deserialize_with = "loose")]
    pub usage: Option<Usage>,
}

/// A child's dialog, as the parent is asked it (`THREADBASE_UI=parent`).
#[derive(Debug, Clone, PartialEq)]
pub struct Dialog {
    /// The child's request id, echoed in the answer.
    pub id: String,
    pub kind: crate::domain::QuestionKind,
    pub title: Option<String>,
    pub message: Option<String>,
    /// `select`'s options.
    pub options: Option<Vec<String>>,
}

/// `extension_ui_request`: a dialog (`select`, `confirm`, `input`, `editor`) or a
/// fire-and-forget notice.
#[derive(Debug, Deserialize)]
pub struct ExtensionUiRequest<'a> {
    #[serde(default, borrow, deserialize_with = "loose")]
    pub id: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "loose")]
    pub method: Option<&'a str>,
    /// As written: the `ui_request` event records it verbatim.
    #[serde(default)]
    pub title: Value,
    #[serde(default)]
    pub message: Value,
    /// `select`'s options.
    #[serde(default)]
    pub options: Value,
}

impl ExtensionUiRequest<'_> {
    /// The dialog as the parent is asked it (`THREADBASE_UI=parent`); `None` for a
    /// fire-and-forget request or one without an id (it could not be answered).
    pub fn dialog(&self) -> Option<Dialog> {
        let kind = crate::domain::QuestionKind::parse(self.method?)?;
        let text = |v: &Value| v.as_str().map(str::to_string);
        let options = match kind {
            crate::domain::QuestionKind::Select => Some(
                self.options
                    .as_array()
                    .map(|a| a.iter().filter_map(text).collect())
                    .unwrap_or_default(),
            ),
            _ => None,
        };
        Some(Dialog {
            id: self.id?.to_string(),
            kind,
            title: text(&self.title),
            message: text(&self.message),
            options,
        })
    }

    /// Whether it waits for an answer.
    pub fn is_dialog(&self) -> bool {
        matches!(self.method, Some("select" | "confirm" | "input" | "editor"))
    }
}

/// `extension_error`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionError<'a> {
    #[serde(default, borrow, deserialize_with = "loose")]
    pub extension_path: Option<&'a str>,
    #[serde(default, borrow, deserialize_with = "loose")]
    pub error: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn odd_fields_read_as_absent_and_keep_the_rest() {
        let v = json!({"role": "assistant", "content": [1, {"type": "text", "text": 2},
            {"type": "text", "text": "a"}, {"type": "toolCall"}], "usage": "lots",
            "stopReason": 5, "errorMessage": "boom"});
        let m: Message = read(&v).unwrap();
        assert_eq!(m.role, Some("assistant"));
        assert_eq!((m.text(), m.tool_calls()), ("a".to_string(), 1));
        assert!(m.usage.is_none() && m.stop_reason.is_none());
        assert_eq!(m.error_message, Some("boom"));
        let plain = json!({"content": "plain"});
        let m: Message = read(&plain).unwrap();
        assert_eq!((m.text(), m.tool_calls()), ("plain".to_string(), 0));
        assert!(read::<Message>(&json!("not an object")).is_none());
    }
}
