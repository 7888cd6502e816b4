//! The threads RPC over HTTP (`threadbase http`): `POST /threads/snapshot` and
//! `POST /threads/restore`, for the terminal plugin that reads worker state (contract C, "RPC").
//!
//! Wire format (one request per connection, `Connection: close`):
//!
//! - Request: `POST /threads/snapshot` or `POST /threads/restore`, header
//!   `Authorization: Bearer <token>`, a JSON body `{"input": {"coordinatorIDs": ["ses_…", …]}}`
//!   with 1..=100 non-empty string ids and at most [`MAX_BODY`] bytes, sent with
//!   `Content-Length` (chunked bodies are refused with 411).
//! - 200: `{"workers": [WorkerView, …]}` (see [`worker_view`]).
//! - Errors: `{"error": {"code", "message"}}` with 400 `invalid_params` (bad JSON, no `input`
//!   wrapper, bad ids), 401 `forbidden` (missing or wrong token), 404 (unknown path), 405 (not
//!   POST), 411 (no `Content-Length` framing), 413 (body over 1 MiB), 431 (head over 16 KiB),
//!   408 (client too slow), 500 for a database failure.
//!
//! The order of checks is: head syntax → token → path → method → framing → size → body. So a
//! client without the token learns nothing about paths, and a too-large body is refused before
//! it is read. Nothing here panics on client input: every malformed byte ends in a status code.
//!
//! The methods themselves sit behind [`WorkerRpc`], so the transport does not depend on how the
//! views are built. [`StoreWorkerRpc`] serves the database through the engine's WorkerView
//! builder (`engine::snapshot_workers`, `engine::restore_workers`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::contract::worker::Workers;
use crate::error::{Error, ErrorCode, Result};
use crate::output::ErrorBody;
use crate::Store;

/// The largest accepted request body (1 MiB).
pub const MAX_BODY: usize = 1 << 20;
/// The largest accepted request line plus headers.
pub const MAX_HEAD: usize = 16 * 1024;
/// At most this many coordinator ids per call (contract C, RPC).
pub const MAX_IDS: usize = 100;
/// Connections handled at once; further ones wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a client may take to send the request line and headers.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send the body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long shutdown waits for requests in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The two methods of the threads RPC. Both take the coordinator ids (already validated: 1..=100
/// non-empty strings, possibly repeated) and return `{"workers": [WorkerView, …]}`.
///
/// Implementations are called from a blocking thread (`spawn_blocking`), so they may block on
/// the database.
pub trait WorkerRpc: Send + Sync {
    /// The workers of the given coordinators. Read-only.
    fn snapshot(&self, ids: &[String]) -> Result<Box<RawValue>>;
    /// Clears the hidden state of the given coordinators' hidden workers (the override becomes
    /// false, even for PASS workers), then returns them as [`WorkerRpc::snapshot`] does.
    fn restore(&self, ids: &[String]) -> Result<Box<RawValue>>;
}

/// [`WorkerRpc`] straight over the database: one indexed query per call for the views, and one
/// indexed UPDATE before it for restore, in the same write transaction.
pub struct StoreWorkerRpc {
    store: Arc<Store>,
}

impl StoreWorkerRpc {
    pub fn new(store: Arc<Store>) -> Self {
        StoreWorkerRpc { store }
    }
}

/// Views come from the engine's one WorkerView builder, so HTTP and `serve` answer alike.
impl WorkerRpc for StoreWorkerRpc {
    fn snapshot(&self, ids: &[String]) -> Result<Box<RawValue>> {
        let facts = crate::engine::snapshot_workers(&*self.store.read()?, ids)?;
        Ok(serde_json::value::to_raw_value(&Workers::of(&facts))?)
    }

    fn restore(&self, ids: &[String]) -> Result<Box<RawValue>> {
        let facts = crate::engine::restore_workers(&self.store, ids)?;
        Ok(serde_json::value::to_raw_value(&Workers::of(&facts))?)
    }
}

/// Parses a request body `{"input": {"coordinatorIDs": [...]}}` into the ids. The `input`
/// object is strict (unknown fields are refused, as the contract's schemas are); other
/// top-level fields are ignored.
pub fn parse_input(body: &[u8]) -> Result<Vec<String>> {
    const SHAPE: &str = "send {\"input\": {\"coordinatorIDs\": [\"ses_...\"]}} with 1 to 100 coordinator session ids";
    let doc: Value = serde_json::from_slice(body).map_err(|e| {
        Error::invalid(format!(
            "The request body is not valid JSON ({e}). Repair: {SHAPE}."
        ))
    })?;
    let Some(outer) = doc.as_object() else {
        return Err(Error::invalid(format!(
            "The request body must be a JSON object. Repair: {SHAPE}."
        )));
    };
    let Some(input) = outer.get("input") else {
        return Err(Error::invalid(format!(
            "The request body has no \"input\" wrapper. Repair: {SHAPE}."
        )));
    };
    let Some(input) = input.as_object() else {
        return Err(Error::invalid(format!(
            "\"input\" must be an object. Repair: {SHAPE}."
        )));
    };
    if let Some(extra) = input.keys().find(|k| *k != "coordinatorIDs") {
        return Err(Error::invalid(format!(
            "Unknown field input.{extra}. Repair: {SHAPE}."
        )));
    }
    let Some(ids) = input.get("coordinatorIDs") else {
        return Err(Error::invalid(format!(
            "input.coordinatorIDs is required. Repair: {SHAPE}."
        )));
    };
    let Some(ids) = ids.as_array() else {
        return Err(Error::invalid(format!(
            "input.coordinatorIDs must be an array of strings. Repair: {SHAPE}."
        )));
    };
    if ids.is_empty() {
        return Err(Error::invalid(format!(
            "input.coordinatorIDs is empty. Repair: {SHAPE}."
        )));
    }
    if ids.len() > MAX_IDS {
        return Err(Error::invalid(format!(
            "input.coordinatorIDs has {} ids; at most {MAX_IDS} are allowed. Repair: split the ids over several requests of at most {MAX_IDS}.",
            ids.len()
        )));
    }
    ids.iter()
        .enumerate()
        .map(|(i, v)| match v.as_str() {
            Some(s) if !s.is_empty() => Ok(s.to_string()),
            Some(_) => Err(Error::invalid(format!(
                "input.coordinatorIDs[{i}] is empty. Repair: {SHAPE}."
            ))),
            None => Err(Error::invalid(format!(
                "input.coordinatorIDs[{i}] is not a string. Repair: {SHAPE}."
            ))),
        })
        .collect()
}

/// Compares two byte strings in time that depends only on their lengths, not their contents.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= u64::from(x ^ y);
    }
    std::hint::black_box(diff) == 0
}

/// An HTTP response: status, JSON body, extra headers.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    /// The JSON body.
    pub body: Box<RawValue>,
    pub headers: Vec<(&'static str, String)>,
}

/// `{"error": {"code", "message"}}`.
fn error_body(code: &str, message: &str) -> Box<RawValue> {
    #[derive(Serialize)]
    struct Doc<'a> {
        error: ErrorBody<'a>,
    }
    let doc = Doc {
        error: ErrorBody { code, message },
    };
    // Strings only: serializing cannot fail.
    serde_json::value::to_raw_value(&doc).unwrap_or_default()
}

impl Response {
    fn ok(body: Box<RawValue>) -> Self {
        Response {
            status: 200,
            body,
            headers: Vec::new(),
        }
    }

    /// An error body `{"error": {"code", "message"}}`.
    pub fn error(status: u16, code: &str, message: impl Into<String>) -> Self {
        Response {
            status,
            body: error_body(code, &message.into()),
            headers: Vec::new(),
        }
    }

    fn from_error(e: &Error) -> Self {
        let status = match e.code {
            ErrorCode::InvalidParams => 400,
            ErrorCode::Forbidden => 403,
            ErrorCode::UnknownReference => 404,
            ErrorCode::Conflict => 409,
            ErrorCode::Limit => 429,
            _ => 500,
        };
        Response::error(status, e.code.as_str(), e.message.clone())
    }

    fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// The bytes on the wire (`HEAD` requests get the headers only).
    pub fn to_bytes(&self, head_only: bool) -> Vec<u8> {
        let body = self.body.to_string();
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n",
            self.status,
            reason(self.status),
            body.len()
        );
        for (name, value) in &self.headers {
            out.push_str(name);
            out.push_str(": ");
            out.push_str(value);
            out.push_str("\r\n");
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        if !head_only {
            bytes.extend_from_slice(body.as_bytes());
        }
        bytes
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        _ => "Internal Server Error",
    }
}

fn bad_request(message: impl Into<String>) -> Response {
    Response::error(400, ErrorCode::InvalidParams.as_str(), message)
}

/// A parsed request line and headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub method: String,
    /// The target without its query string.
    pub path: String,
    /// Header names lowercased, values trimmed, in arrival order.
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    /// The values of one header (name in lowercase).
    pub fn header_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn header<'a>(&'a self, name: &'a str) -> Option<&'a str> {
        self.header_values(name).next()
    }

    /// The declared body length: `None` without the header; repeated headers must agree.
    pub fn content_length(&self) -> std::result::Result<Option<usize>, Response> {
        let mut found: Option<usize> = None;
        for v in self.header_values("content-length") {
            let n = (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                .then(|| v.parse::<usize>().unwrap_or(usize::MAX))
                .ok_or_else(|| {
                    bad_request(format!(
                        "Content-Length {v:?} is not a number. Repair: send the body's length in bytes."
                    ))
                })?;
            if found.is_some_and(|f| f != n) {
                return Err(bad_request(
                    "Conflicting Content-Length headers. Repair: send one Content-Length.",
                ));
            }
            found = Some(n);
        }
        Ok(found)
    }
}

/// The end of the head (the index just past `\r\n\r\n`), if the buffer holds it.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Parses the request line and headers (the bytes up to and including the blank line).
pub fn parse_head(head: &[u8]) -> std::result::Result<RequestHead, Response> {
    let text = std::str::from_utf8(head).map_err(|_| {
        bad_request("The request head is not UTF-8. Repair: send an HTTP/1.1 request.")
    })?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad_request(
            "Malformed request line. Repair: send `POST /threads/snapshot HTTP/1.1`.",
        ));
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(bad_request(
            "Malformed request method. Repair: send `POST /threads/snapshot HTTP/1.1`.",
        ));
    }
    if !target.starts_with('/') {
        return Err(bad_request(
            "The request target must be a path. Repair: send `POST /threads/snapshot HTTP/1.1`.",
        ));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(bad_request(format!(
            "Unsupported protocol {version:?}. Repair: speak HTTP/1.1."
        )));
    }
    let path = target.split('?').next().unwrap_or(target).to_string();
    let mut headers = Vec::new();
    for line in lines {
        if line.is_empty() {
            continue;
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad_request(format!(
                "Malformed header line {line:?}. Repair: send `Name: value` headers."
            )));
        };
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        {
            return Err(bad_request(format!(
                "Malformed header name {name:?}. Repair: send `Name: value` headers."
            )));
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    Ok(RequestHead {
        method: method.to_string(),
        path,
        headers,
    })
}

/// Which RPC method a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Snapshot,
    Restore,
}

/// The checks that need only the head: token, path, method, framing, size. `Ok` carries the
/// method and the body length to read.
pub fn check_head(
    head: &RequestHead,
    token: &str,
) -> std::result::Result<(Method, usize), Response> {
    let mut auth = head.header_values("authorization");
    let presented = match (auth.next(), auth.next()) {
        (Some(v), None) => v
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim()),
        _ => None,
    };
    if !presented.is_some_and(|t| constant_time_eq(t.as_bytes(), token.as_bytes())) {
        let what = if presented.is_none() {
            "Missing bearer token"
        } else {
            "Wrong bearer token"
        };
        return Err(Response::error(
            401,
            ErrorCode::Forbidden.as_str(),
            format!(
                "{what}. Repair: send Authorization: Bearer <token>, with the token from $THREADBASE_HTTP_TOKEN or the token file that `threadbase http` printed at start."
            ),
        )
        .with_header("WWW-Authenticate", "Bearer realm=\"threadbase\""));
    }
    let method = match head.path.as_str() {
        "/threads/snapshot" => Method::Snapshot,
        "/threads/restore" => Method::Restore,
        other => {
            return Err(Response::error(
                404,
                "not_found",
                format!(
                    "No such endpoint {other:?}. Repair: POST to /threads/snapshot or /threads/restore."
                ),
            ))
        }
    };
    if head.method != "POST" {
        return Err(Response::error(
            405,
            "method_not_allowed",
            format!(
                "{} is not allowed on {}. Repair: use POST with a JSON body.",
                head.method, head.path
            ),
        )
        .with_header("Allow", "POST"));
    }
    if head.header("transfer-encoding").is_some() {
        return Err(Response::error(
            411,
            ErrorCode::InvalidParams.as_str(),
            "Transfer-Encoding bodies are not supported. Repair: send the body with a Content-Length header.",
        ));
    }
    let length = head.content_length()?.unwrap_or(0);
    if length > MAX_BODY {
        return Err(Response::error(
            413,
            ErrorCode::Limit.as_str(),
            format!(
                "The body has {length} bytes; at most {MAX_BODY} are accepted. Repair: send at most {MAX_IDS} coordinator ids per request."
            ),
        ));
    }
    Ok((method, length))
}

/// Serves the threads RPC on `listener` until `shutdown` completes, then waits (a few seconds at
/// most) for requests in flight.
pub async fn serve(
    listener: TcpListener,
    token: String,
    rpc: Arc<dyn WorkerRpc>,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let token: Arc<str> = token.into();
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, _)) => {
                let token = token.clone();
                let rpc = rpc.clone();
                tokio::spawn(async move {
                    handle_connection(stream, &token, rpc).await;
                    drop(permit);
                });
            }
            Err(e) => {
                // Out of descriptors and the like: wait a moment instead of spinning.
                eprintln!("threadbase http: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    drop(listener);
    let all = u32::try_from(MAX_CONNECTIONS).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, slots.acquire_many(all)).await;
    Ok(())
}

/// What reading a request produced.
enum Read {
    /// The client closed (or the socket failed) before a request head arrived.
    Nothing,
    /// Send `response`. `consumed`: the whole request was read (otherwise the rest is drained
    /// after the response). `head_only`: a HEAD request, answered without a body.
    Reply {
        response: Response,
        consumed: bool,
        head_only: bool,
    },
}

impl Read {
    /// A reply before the request was fully read.
    fn early(response: Response) -> Self {
        Read::Reply {
            response,
            consumed: false,
            head_only: false,
        }
    }

    /// A reply after the whole request was read.
    fn done(response: Response) -> Self {
        Read::Reply {
            response,
            consumed: true,
            head_only: false,
        }
    }
}

async fn handle_connection(mut stream: TcpStream, token: &str, rpc: Arc<dyn WorkerRpc>) {
    let _ = stream.set_nodelay(true);
    let Read::Reply {
        response,
        consumed,
        head_only,
    } = read_and_answer(&mut stream, token, rpc).await
    else {
        return;
    };
    let bytes = response.to_bytes(head_only);
    let _ = tokio::time::timeout(BODY_TIMEOUT, stream.write_all(&bytes)).await;
    let _ = stream.shutdown().await;
    if !consumed {
        // Read what the client still sends (bounded) so closing does not reset the connection
        // before the client has read the response.
        let mut sink = [0u8; 16 * 1024];
        let mut left = 4 * MAX_BODY;
        let drain = async {
            while left > 0 {
                match stream.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => left = left.saturating_sub(n),
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), drain).await;
    }
}

async fn read_and_answer(stream: &mut TcpStream, token: &str, rpc: Arc<dyn WorkerRpc>) -> Read {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = [0u8; 8192];
    let end = {
        let read_head = async {
            loop {
                let end = head_end(&buf);
                if end.unwrap_or(buf.len()) > MAX_HEAD {
                    return Err(Response::error(
                        431,
                        ErrorCode::InvalidParams.as_str(),
                        format!("The request head exceeds {MAX_HEAD} bytes. Repair: send fewer or shorter headers."),
                    ));
                }
                if end.is_some() {
                    return Ok(end);
                }
                match stream.read(&mut chunk).await {
                    Ok(0) if buf.is_empty() => return Ok(None),
                    Ok(0) => {
                        return Err(bad_request(
                            "The connection closed inside the request head. Repair: end the headers with an empty line.",
                        ))
                    }
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    Err(_) => return Ok(None),
                }
            }
        };
        match tokio::time::timeout(HEAD_TIMEOUT, read_head).await {
            Ok(Ok(Some(end))) => end,
            Ok(Ok(None)) => return Read::Nothing,
            Ok(Err(r)) => return Read::early(r),
            Err(_) => {
                return Read::early(Response::error(
                    408,
                    ErrorCode::InvalidParams.as_str(),
                    "The request head took too long. Repair: send the whole request at once.",
                ))
            }
        }
    };
    let head = match parse_head(&buf[..end]) {
        Ok(h) => h,
        Err(r) => return Read::early(r),
    };
    let head_only = head.method == "HEAD";
    let (method, length) = match check_head(&head, token) {
        Ok(x) => x,
        Err(r) => {
            let consumed = buf.len() == end && matches!(head.content_length(), Ok(None | Some(0)));
            return Read::Reply {
                response: r,
                consumed,
                head_only,
            };
        }
    };
    let mut body: Vec<u8> = buf[end..].to_vec();
    body.truncate(length);
    if body.len() < length {
        if head
            .header("expect")
            .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
        {
            let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await;
        }
        body.reserve(length - body.len());
        let read_body = async {
            while body.len() < length {
                let want = (length - body.len()).min(chunk.len());
                match stream.read(&mut chunk[..want]).await {
                    Ok(0) | Err(_) => return false,
                    Ok(n) => body.extend_from_slice(&chunk[..n]),
                }
            }
            true
        };
        match tokio::time::timeout(BODY_TIMEOUT, read_body).await {
            Ok(true) => {}
            Ok(false) => {
                return Read::early(bad_request(format!(
                        "The body ended before its Content-Length ({length} bytes). Repair: send exactly Content-Length bytes."
                    )))
            }
            Err(_) => {
                return Read::early(Response::error(
                        408,
                        ErrorCode::InvalidParams.as_str(),
                        "The request body took too long. Repair: send the whole request at once.",
                    ))
            }
        }
    }
    let ids = match parse_input(&body) {
        Ok(ids) => ids,
        Err(e) => return Read::done(Response::from_error(&e)),
    };
    let answer = tokio::task::spawn_blocking(move || match method {
        Method::Snapshot => rpc.snapshot(&ids),
        Method::Restore => rpc.restore(&ids),
    })
    .await;
    let response = match answer {
        Ok(Ok(v)) => Response::ok(v),
        Ok(Err(e)) => Response::from_error(&e),
        Err(_) => Response::error(
            500,
            ErrorCode::Internal.as_str(),
            "The request handler failed. Repair: retry; report a bug if it persists.",
        ),
    };
    Read::done(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn head(text: &str) -> RequestHead {
        parse_head(text.as_bytes()).expect("head")
    }

    #[test]
    fn parses_a_request_head() {
        let h =
            head("POST /threads/snapshot?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n");
        assert_eq!(h.method, "POST");
        assert_eq!(h.path, "/threads/snapshot");
        assert_eq!(h.content_length().unwrap(), Some(12));
    }

    #[test]
    fn malformed_heads_are_400_not_panics() {
        for bad in [
            "",
            "\r\n\r\n",
            "POST\r\n\r\n",
            "POST /x\r\n\r\n",
            "POST /x HTTP/1.1 extra\r\n\r\n",
            "post /x HTTP/1.1\r\n\r\n",
            "POST x HTTP/1.1\r\n\r\n",
            "POST /x HTTP/2\r\n\r\n",
            "POST /x HTTP/1.1\r\nno colon\r\n\r\n",
            "POST /x HTTP/1.1\r\n: v\r\n\r\n",
            "POST /x HTTP/1.1\r\nbad name: v\r\n\r\n",
        ] {
            let r = parse_head(bad.as_bytes()).expect_err(bad);
            assert_eq!(r.status, 400, "{bad:?}");
        }
        assert_eq!(
            parse_head(b"POST /\xff HTTP/1.1\r\n\r\n")
                .unwrap_err()
                .status,
            400
        );
        let h = head("POST /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
        assert_eq!(h.content_length().unwrap_err().status, 400);
        let h = head("POST /x HTTP/1.1\r\nContent-Length: -1\r\n\r\n");
        assert_eq!(h.content_length().unwrap_err().status, 400);
        let h = head("POST /x HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n");
        assert_eq!(h.content_length().unwrap(), Some(usize::MAX));
    }

    #[test]
    fn head_checks_run_in_order() {
        let t = "secret-token";
        let check = |text: &str| check_head(&head(text), t);
        let status = |text: &str| check(text).unwrap_err().status;
        assert_eq!(status("GET /nope HTTP/1.1\r\n\r\n"), 401);
        assert_eq!(
            status("POST /threads/snapshot HTTP/1.1\r\nAuthorization: Bearer wrong\r\n\r\n"),
            401
        );
        assert_eq!(
            status("POST /threads/snapshot HTTP/1.1\r\nAuthorization: Basic secret-token\r\n\r\n"),
            401
        );
        assert_eq!(
            status("POST /threads/snapshot HTTP/1.1\r\nAuthorization: Bearer secret-token\r\nAuthorization: Bearer secret-token\r\n\r\n"),
            401
        );
        assert_eq!(
            status("GET /nope HTTP/1.1\r\nAuthorization: Bearer secret-token\r\n\r\n"),
            404
        );
        assert_eq!(
            status("GET /threads/restore HTTP/1.1\r\nAuthorization: bearer secret-token\r\n\r\n"),
            405
        );
        assert_eq!(
            status("POST /threads/restore HTTP/1.1\r\nAuthorization: Bearer secret-token\r\nTransfer-Encoding: chunked\r\n\r\n"),
            411
        );
        assert_eq!(
            status("POST /threads/restore HTTP/1.1\r\nAuthorization: Bearer secret-token\r\nContent-Length: 1048577\r\n\r\n"),
            413
        );
        assert_eq!(
            check("POST /threads/restore HTTP/1.1\r\nAuthorization: Bearer secret-token\r\nContent-Length: 1048576\r\n\r\n").unwrap(),
            (Method::Restore, MAX_BODY)
        );
    }

    #[test]
    fn parses_the_input_wrapper() {
        assert_eq!(
            parse_input(br#"{"input":{"coordinatorIDs":["ses_a","ses_b","ses_a"]}}"#).unwrap(),
            ["ses_a", "ses_b", "ses_a"]
        );
        let hundred: Vec<String> = (0..100).map(|i| format!("ses_{i}")).collect();
        let doc = json!({"input": {"coordinatorIDs": hundred}}).to_string();
        assert_eq!(parse_input(doc.as_bytes()).unwrap().len(), 100);
        let too_many: Vec<String> = (0..101).map(|i| format!("ses_{i}")).collect();
        let doc = json!({"input": {"coordinatorIDs": too_many}}).to_string();
        for bad in [
            doc.as_bytes(),
            b"",
            b"{",
            b"[]",
            br#"{"coordinatorIDs":["ses_a"]}"#,
            br#"{"input":[]}"#,
            br#"{"input":{}}"#,
            br#"{"input":{"coordinatorIDs":"ses_a"}}"#,
            br#"{"input":{"coordinatorIDs":[]}}"#,
            br#"{"input":{"coordinatorIDs":[1]}}"#,
            br#"{"input":{"coordinatorIDs":[""]}}"#,
            br#"{"input":{"coordinatorIDs":["a"],"x":1}}"#,
        ] {
            let e = parse_input(bad).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidParams);
            assert!(e.message.contains("Repair:"), "{}", e.message);
        }
    }

    #[test]
    fn constant_time_eq_compares_bytes() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }
}
