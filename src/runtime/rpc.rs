//! The RPC codec: commands with ids written to the child's stdin by one task, responses
//! matched by id (they may come out of order), each call with a timeout; and strict LF
//! framing of the child's stdout with a per-line cap.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

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
}

/// The client side of one child's RPC channel.
pub struct RpcClient {
    stdin: mpsc::Sender<Vec<u8>>,
    pending: Mutex<HashMap<String, oneshot::Sender<Response>>>,
    next: AtomicU64,
}

impl RpcClient {
    /// A client writing command lines into `stdin` (drained by the child's stdin task).
    pub fn new(stdin: mpsc::Sender<Vec<u8>>) -> Self {
        RpcClient {
            stdin,
            pending: Mutex::new(HashMap::new()),
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
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), tx);
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
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
    }

    /// Routes a response line to its caller. Returns false when nobody waits for that id.
    pub fn deliver(&self, v: &Value) -> bool {
        let Some(id) = v.get("id").and_then(Value::as_str) else {
            return false;
        };
        let Some(tx) = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
        else {
            return false;
        };
        let resp = Response {
            success: v["success"].as_bool().unwrap_or(false),
            data: v.get("data").cloned().unwrap_or(Value::Null),
            error: v.get("error").and_then(Value::as_str).map(str::to_string),
        };
        tx.send(resp).is_ok()
    }

    /// Fails every pending call (the child's stdout closed).
    pub fn close(&self) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

/// One framed stdout line.
#[derive(Debug, PartialEq)]
pub enum Line {
    Json(Value),
    /// Not a JSON object; the text (cut for the record) and the parse error.
    Invalid(String),
    /// Longer than [`MAX_LINE_BYTES`]; dropped, with its length.
    TooLong(usize),
}

/// Reads the next LF-terminated line (a trailing `\r` is removed; U+2028/2029 are ordinary
/// characters), never buffering more than the cap. `None` at EOF.
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
    match serde_json::from_slice::<Value>(buf) {
        Ok(v @ Value::Object(_)) => Some(Line::Json(v)),
        Ok(_) => Some(Line::Invalid(cut(buf))),
        Err(e) => Some(Line::Invalid(format!("{} ({e})", cut(buf)))),
    }
}

fn cut(buf: &[u8]) -> String {
    let text = String::from_utf8_lossy(buf);
    crate::text::truncate_ellipsis(&text, 200)
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
