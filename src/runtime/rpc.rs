//! The RPC codec: commands with ids written to the child's stdin by one task, responses
//! matched by id (they may come out of order), each call with a timeout; and strict LF
//! framing of the child's stdout with a per-line cap.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde::de::{self, DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess, Visitor};
use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};
use tokio::sync::{mpsc, oneshot};

/// Longest stdout line accepted from a child.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Why a call got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// No response within the timeout; the command was written and may still run.
    Timeout,
    /// The child's stdin or stdout is closed.
    Closed,
}

/// A response from the child.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub success: bool,
    pub data: Value,
    pub error: Option<String>,
    /// For `get_state`: whether the reader, applying this answer in stream order, found the
    /// child idle with nothing pending.
    pub refreshed_idle: Option<bool>,
}

/// The client side of one child's RPC channel.
pub struct RpcClient {
    stdin: mpsc::Sender<Vec<u8>>,
    /// Calls waiting for a response; `None` once the child's stdout closed, so a call made after
    /// that (a child that exited before its first command) fails at once instead of timing out.
    pending: Mutex<Option<HashMap<String, oneshot::Sender<Response>>>>,
    next: AtomicU64,
}

impl RpcClient {
    /// A client writing command lines into `stdin` (drained by the child's stdin task).
    pub fn new(stdin: mpsc::Sender<Vec<u8>>) -> Self {
        RpcClient {
            stdin,
            pending: Mutex::new(Some(HashMap::new())),
            next: AtomicU64::new(1),
        }
    }

    /// Sends `{"type": kind, "id": …, …fields}` and waits up to `timeout` for its response.
    pub async fn call(
        &self,
        kind: &str,
        fields: Value,
        timeout: Duration,
    ) -> Result<Response, CallError> {
        let id = format!("tb-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let mut cmd = Map::new();
        cmd.insert("id".into(), Value::from(id.clone()));
        cmd.insert("type".into(), Value::from(kind));
        if let Value::Object(extra) = fields {
            cmd.extend(extra);
        }
        let (tx, rx) = oneshot::channel();
        match self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            Some(pending) => pending.insert(id.clone(), tx),
            None => return Err(CallError::Closed),
        };
        if !self.write(&Value::Object(cmd)).await {
            self.forget(&id);
            return Err(CallError::Closed);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(_)) => Err(CallError::Closed),
            Err(_) => {
                self.forget(&id);
                Err(CallError::Timeout)
            }
        }
    }

    /// Writes a message that gets no response (such as `extension_ui_response`).
    pub async fn notify(&self, message: Value) -> bool {
        self.write(&message).await
    }

    async fn write(&self, v: &Value) -> bool {
        let mut line = serde_json::to_vec(v).unwrap_or_default();
        line.push(b'\n');
        self.stdin.send(line).await.is_ok()
    }

    fn forget(&self, id: &str) {
        if let Some(pending) = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            pending.remove(id);
        }
    }

    /// Routes a response line to its caller. Returns false when nobody waits for that id.
    pub fn deliver(&self, v: &Value) -> bool {
        self.deliver_with(v, None)
    }

    /// Like [`RpcClient::deliver`], attaching the reader's reading of a `get_state` answer.
    pub fn deliver_with(&self, v: &Value, refreshed_idle: Option<bool>) -> bool {
        let Some(id) = v.get("id").and_then(Value::as_str) else {
            return false;
        };
        let Some(tx) = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
            .and_then(|pending| pending.remove(id))
        else {
            return false;
        };
        let resp = Response {
            success: v["success"].as_bool().unwrap_or(false),
            data: v.get("data").cloned().unwrap_or(Value::Null),
            error: v.get("error").and_then(Value::as_str).map(str::to_string),
            refreshed_idle,
        };
        tx.send(resp).is_ok()
    }

    /// Fails every pending call and every later one (the child's stdout closed).
    pub fn close(&self) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
    }
}

/// One framed stdout line.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A JSON object: whole, or for a [`LEAN_EVENTS`] type its `type` and listed fields.
    Json(Value),
    /// Not a JSON object; the text (cut for the record) and the parse error.
    Invalid(String),
    /// Longer than [`MAX_LINE_BYTES`]; dropped, with its length.
    TooLong(usize),
}

/// Reads the next LF-terminated line (a trailing `\r` is removed; U+2028/2029 are ordinary
/// characters), never buffering more than the cap. `None` at EOF. Lines of the high-volume
/// [`LEAN_EVENTS`] types come back with only the fields the runtime reads.
pub async fn read_line<R: AsyncBufRead + Unpin>(reader: &mut R, buf: &mut Vec<u8>) -> Option<Line> {
    buf.clear();
    let mut too_long = 0usize;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok(c) => c,
            Err(_) => return None,
        };
        if chunk.is_empty() {
            // EOF: a final unterminated line still counts.
            if buf.is_empty() && too_long == 0 {
                return None;
            }
            break;
        }
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let piece = &chunk[..if done { take - 1 } else { take }];
        if too_long > 0 || buf.len() + piece.len() > MAX_LINE_BYTES {
            too_long += buf.len() + piece.len();
            buf.clear();
        } else {
            buf.extend_from_slice(piece);
        }
        reader.consume(take);
        if done {
            break;
        }
    }
    if too_long > 0 {
        return Some(Line::TooLong(too_long));
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Some(parse_line(buf))
}

/// Parses one framed line. A line is valid UTF-8 in the common case: it is checked once as a
/// whole, not string by string. Lines of the [`LEAN_EVENTS`] types keep only their listed
/// fields; every other line (responses included) is kept whole.
fn parse_line(buf: &[u8]) -> Line {
    let parsed = match std::str::from_utf8(buf) {
        Ok(text) => match lean_fields(buf) {
            Some(keep) => match parse_lean(text, keep) {
                Some(map) => return Line::Json(Value::Object(map)),
                // Not well-formed, or not what the prefix promised: the whole parse decides
                // and reports it.
                None => serde_json::from_str::<Value>(text),
            },
            None => serde_json::from_str::<Value>(text),
        },
        Err(_) => serde_json::from_slice::<Value>(buf),
    };
    match parsed {
        Ok(v @ Value::Object(_)) => Line::Json(v),
        Ok(_) => Line::Invalid(cut(buf)),
        Err(e) => Line::Invalid(format!("{} ({e})", cut(buf))),
    }
}

/// Event types whose lines the runtime reads only a few top-level fields of, and those fields
/// (besides `type`). They are the bulk of a child's stdout: every `message_update` delta
/// carries a `usage` object, and `message_start`, `turn_end`, `agent_end` and the
/// `tool_execution_*` events repeat whole messages, tool arguments and growing tool outputs
/// that nothing reads. Such a line is still parsed to its end (a malformed one is `Invalid` as
/// before), but its other fields are skipped instead of built; skipped fields are not held to
/// the whole parse's nesting limit (128) or f64 number range, which Pi's `JSON.stringify`
/// output can exceed only in the first case, and then the event is no longer lost.
///
/// This list must cover every field `read_stdout` and `pi::events`' structs (what
/// `mapping::Tracker::on_event` reads) name for these types; the
/// `lean_lines_map_like_whole_lines` test checks it on the recorded Pi 1.6 transcript in
/// `benches/data`. An event type not listed here is kept whole.
pub const LEAN_EVENTS: &[(&str, &[&str])] = &[
    ("message_update", &["assistantMessageEvent"]),
    ("message_start", &[]),
    ("tool_execution_start", &["toolName", "args"]),
    ("tool_execution_update", &["toolName"]),
    ("tool_execution_end", &["toolName", "isError"]),
    ("turn_end", &[]),
    ("agent_end", &["willRetry"]),
];

/// The kept fields when the line starts exactly as Pi writes these events,
/// `{"type":"<kind>",` (or `}`), with a [`LEAN_EVENTS`] kind.
fn lean_fields(buf: &[u8]) -> Option<&'static [&'static str]> {
    const HEAD: &[u8] = b"{\"type\":\"";
    let rest = buf.strip_prefix(HEAD)?;
    let end = rest.iter().position(|&b| b == b'"')?;
    if !matches!(rest.get(end + 1), Some(b',' | b'}')) {
        return None;
    }
    let kind = &rest[..end];
    LEAN_EVENTS
        .iter()
        .find(|(k, _)| k.as_bytes() == kind)
        .map(|(_, keep)| *keep)
}

/// Parses an object keeping `type` and the `keep` fields (the last of duplicate keys wins, as
/// in a whole parse). `None` when the text is not one well-formed object, or has a second
/// `type` (whose last value a whole parse would report).
fn parse_lean(text: &str, keep: &'static [&'static str]) -> Option<Map<String, Value>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let map = LeanObject { keep }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(map)
}

struct LeanObject {
    keep: &'static [&'static str],
}

impl<'de> DeserializeSeed<'de> for LeanObject {
    type Value = Map<String, Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for LeanObject {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut out = Map::new();
        let mut seen_type = false;
        while let Some(key) = access.next_key_seed(Key)? {
            if key == "type" {
                if seen_type {
                    return Err(A::Error::custom("a second type"));
                }
                seen_type = true;
                out.insert(key.into_owned(), access.next_value::<Value>()?);
            } else if self.keep.contains(&&*key) {
                out.insert(key.into_owned(), access.next_value::<Value>()?);
            } else {
                access.next_value::<IgnoredAny>()?;
            }
        }
        Ok(out)
    }
}

/// An object key, borrowed from the line when it has no escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }
}

fn cut(buf: &[u8]) -> String {
    let text = String::from_utf8_lossy(buf);
    crate::text::truncate_ellipsis(&text, 200)
}

/// The `extension_ui_response` that answers a dialog: `confirmed` for a confirm (a boolean
/// answer), `value` for the others.
pub fn answer_ui(id: &str, answer: &Value) -> Value {
    match answer {
        Value::Bool(b) => json!({"type": "extension_ui_response", "id": id, "confirmed": b}),
        other => json!({"type": "extension_ui_response", "id": id, "value": other}),
    }
}

/// The `extension_ui_response` that cancels a dialog.
pub fn cancel_ui(id: &str) -> Value {
    json!({"type": "extension_ui_response", "id": id, "cancelled": true})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_lines_strictly() {
        let big = "x".repeat(MAX_LINE_BYTES + 10);
        let input =
            format!("{{\"a\":1}}\r\n{{\"b\":\"\u{2028}\"}}\nnot json\n\"str\"\n{big}\n{{\"c\":3}}");
        let mut r = tokio::io::BufReader::with_capacity(64, input.as_bytes());
        let mut buf = Vec::new();
        assert_eq!(
            read_line(&mut r, &mut buf).await,
            Some(Line::Json(json!({"a":1})))
        );
        assert_eq!(
            read_line(&mut r, &mut buf).await,
            Some(Line::Json(json!({"b":"\u{2028}"})))
        );
        assert!(
            matches!(read_line(&mut r, &mut buf).await, Some(Line::Invalid(t)) if t.starts_with("not json"))
        );
        assert!(matches!(
            read_line(&mut r, &mut buf).await,
            Some(Line::Invalid(_))
        ));
        assert_eq!(
            read_line(&mut r, &mut buf).await,
            Some(Line::TooLong(MAX_LINE_BYTES + 10))
        );
        assert_eq!(
            read_line(&mut r, &mut buf).await,
            Some(Line::Json(json!({"c":3})))
        );
        assert_eq!(read_line(&mut r, &mut buf).await, None);
    }

    #[test]
    fn lean_lines_keep_the_listed_fields() {
        let line = br#"{"type":"message_update","usage":{"input":1,"cost":{"total":0}},"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"Hi \u00e9"}}"#;
        assert_eq!(
            parse_line(line),
            Line::Json(
                json!({"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"Hi \u{e9}"}})
            )
        );
        // Duplicate kept keys: the last wins, as in a whole parse.
        assert_eq!(
            parse_line(br#"{"type":"tool_execution_end","toolName":"a","result":[1,{"x":[]}],"toolName":"b","isError":true}"#),
            Line::Json(json!({"type":"tool_execution_end","toolName":"b","isError":true}))
        );
        // Skipped fields are still checked: malformed lines fail with the whole parse's error.
        for bad in [
            &br#"{"type":"turn_end","message":{"role":"assistant",}}"#[..],
            br#"{"type":"turn_end","message":tru}"#,
            br#"{"type":"turn_end"} x"#,
            br#"{"type":"turn_end","m":"\x"}"#,
            b"{\"type\":\"turn_end\",\"m\":\"\xff\"}",
        ] {
            let whole = serde_json::from_slice::<Value>(bad).unwrap_err();
            assert_eq!(
                parse_line(bad),
                Line::Invalid(format!("{} ({whole})", cut(bad))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        // A second type, other kinds, other spellings: kept whole.
        for whole in [
            &br#"{"type":"turn_end","x":1,"type":"response","id":"a"}"#[..],
            br#"{"type":"agent_settled","aborted":false}"#,
            br#"{"type":"queue_update","steering":["a"],"followUp":[]}"#,
            br#"{ "type":"turn_end","message":{}}"#,
            br#"{"id":"tb-1","type":"response","command":"get_state","success":true,"data":{}}"#,
        ] {
            assert_eq!(
                parse_line(whole),
                Line::Json(serde_json::from_slice(whole).unwrap())
            );
        }
    }

    /// The lean parse drops nothing the mapping reads: every line of a recorded Pi 1.6
    /// transcript maps to the same effects parsed lean or whole.
    #[test]
    fn lean_lines_map_like_whole_lines() {
        use crate::runtime::mapping::Tracker;
        let transcript = include_str!("../../benches/data/pi16_events.jsonl");
        let (mut lean, mut whole) = (Tracker::new(), Tracker::new());
        let mut leaned = 0;
        for line in transcript.lines() {
            let Line::Json(l) = parse_line(line.as_bytes()) else {
                panic!("{line}")
            };
            let w: Value = serde_json::from_str(line).unwrap();
            leaned += usize::from(l != w);
            assert_eq!(lean.on_event(&l), whole.on_event(&w), "{line}");
            assert_eq!(lean.phase, whole.phase);
        }
        assert!(leaned > 100, "the transcript exercises the lean parse");
    }

    #[tokio::test]
    async fn responses_match_by_id_out_of_order() {
        let (tx, mut rx) = mpsc::channel(8);
        let client = std::sync::Arc::new(RpcClient::new(tx));
        let c1 = client.clone();
        let c2 = client.clone();
        let a = tokio::spawn(async move {
            c1.call("get_state", json!({}), Duration::from_secs(5))
                .await
        });
        let b =
            tokio::spawn(async move { c2.call("abort", json!({}), Duration::from_secs(5)).await });
        let mut ids = Vec::new();
        for _ in 0..2 {
            let line = rx.recv().await.unwrap();
            let v: Value = serde_json::from_slice(&line).unwrap();
            ids.push((
                v["id"].as_str().unwrap().to_string(),
                v["type"].as_str().unwrap().to_string(),
            ));
        }
        for (id, kind) in ids.iter().rev() {
            assert!(client.deliver(&json!({"id": id, "type": "response", "command": kind, "success": true, "data": {"k": kind}})));
        }
        assert_eq!(a.await.unwrap().unwrap().data["k"], "get_state");
        assert_eq!(b.await.unwrap().unwrap().data["k"], "abort");
        let t = client
            .call("get_state", json!({}), Duration::from_millis(20))
            .await;
        assert_eq!(t, Err(CallError::Timeout));
    }
}
