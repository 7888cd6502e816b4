//! The threads RPC over HTTP (`threadbase http`): `POST /threads/snapshot` and
//! `POST /threads/restore`, for the terminal plugin that reads worker state (contract C, "RPC").
//! HTTP/1.1 itself (framing, chunked bodies, `Expect: 100-continue`, keep-alive, the head
//! limits and timeout) is hyper's; this module is the endpoint's rules.
//!
//! Wire format:
//!
//! - Request: `POST /threads/snapshot` or `POST /threads/restore`, header
//!   `Authorization: Bearer <token>`, a JSON body `{"input": {"coordinatorIDs": ["ses_…", …]}}`
//!   with 1..=100 non-empty string ids and at most [`MAX_BODY`] bytes, framed by
//!   `Content-Length` or chunked.
//! - 200: `{"workers": [WorkerView, …]}`.
//! - Errors: `{"error": {"code", "message"}}` with 400 `invalid_params` (bad JSON, no `input`
//!   wrapper, bad ids, a body cut short), 401 `forbidden` (missing or wrong token), 404 (unknown
//!   path), 405 (not POST), 413 (body over 1 MiB), 408 (body too slow), 500 for a database
//!   failure. A head hyper cannot parse gets hyper's own 400 (431 over [`MAX_HEAD`]) with an
//!   empty body; a head not complete within [`HEAD_TIMEOUT`] closes the connection.
//!
//! The order of checks is: head (hyper: syntax and framing) → token → path → method → body
//! (size, then JSON). So a client without the token learns nothing about paths, and a body
//! declared too large is refused before it is read (and before `100 Continue`).
//!
//! Connections: a response closes the connection (`Connection: close`) unless the request asked
//! to keep it (`Connection: keep-alive`, as browsers, Node's fetch and Python's requests send);
//! a kept connection serves further requests, pipelined ones included, until it has been idle
//! for [`HEAD_TIMEOUT`].
//!
//! The methods themselves sit behind [`WorkerRpc`], so the transport does not depend on how the
//! views are built. [`StoreWorkerRpc`] serves the database through the engine's WorkerView
//! builder (`engine::snapshot_workers`, `engine::restore_workers`).

use crate::domain::SessionId;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::header::{HeaderValue, AUTHORIZATION, CONNECTION};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::contract::worker::Workers;
use crate::error::{Error, ErrorCode, Result};
use crate::serve::listen;
use crate::serve::output::ErrorBody;
use crate::Store;

/// The largest accepted request body (1 MiB).
pub const MAX_BODY: usize = 1 << 20;
/// The largest accepted request line plus headers.
pub const MAX_HEAD: usize = 16 * 1024;
/// At most this many coordinator ids per call (contract C, RPC).
pub const MAX_IDS: usize = 100;
/// Connections handled at once; further ones wait in the listen backlog.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a client may take to send the request line and headers, and how long a kept-alive
/// connection may sit idle before the next request.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// What a kept-alive response advertises (`Keep-Alive: timeout=…`), below [`HEAD_TIMEOUT`] so a
/// client that honours it never sends into a connection the server is closing.
const KEEP_ALIVE_HINT: &str = "timeout=5";
/// How long a client may take to send the body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long shutdown waits for requests in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// After the last response, how long (and how many bytes) the server reads what the client still
/// sends before it closes, so a close with unread input (an early 401 or 413) does not reset
/// the connection before the client has read the response.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 4 * MAX_BODY;

/// The two methods of the threads RPC. Both take the coordinator ids (already validated: 1..=100
/// non-empty strings, possibly repeated) and return `{"workers": [WorkerView, …]}`.
///
/// Implementations are called from a blocking thread (`spawn_blocking`), so they may block on
/// the database.
pub trait WorkerRpc: Send + Sync {
    /// The workers of the given coordinators. Read-only.
    fn snapshot(&self, ids: &[SessionId]) -> Result<Box<RawValue>>;
    /// Clears the hidden state of the given coordinators' hidden workers (the override becomes
    /// false, even for PASS workers), then returns them as [`WorkerRpc::snapshot`] does.
    fn restore(&self, ids: &[SessionId]) -> Result<Box<RawValue>>;
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
    fn snapshot(&self, ids: &[SessionId]) -> Result<Box<RawValue>> {
        let facts = crate::engine::snapshot_workers(&self.store.read()?, ids)?;
        Ok(serde_json::value::to_raw_value(&Workers::of(&facts))?)
    }

    fn restore(&self, ids: &[SessionId]) -> Result<Box<RawValue>> {
        let facts = crate::engine::restore_workers(&self.store, ids)?;
        Ok(serde_json::value::to_raw_value(&Workers::of(&facts))?)
    }
}

/// Parses a request body `{"input": {"coordinatorIDs": [...]}}` into the ids. The `input`
/// object is strict (unknown fields are refused, as the contract's schemas are); other
/// top-level fields are ignored.
pub fn parse_input(body: &[u8]) -> Result<Vec<SessionId>> {
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
            Some(s) if !s.is_empty() => Ok(SessionId::new(s)),
            Some(_) => Err(Error::invalid(format!(
                "input.coordinatorIDs[{i}] is empty. Repair: {SHAPE}."
            ))),
            None => Err(Error::invalid(format!(
                "input.coordinatorIDs[{i}] is not a string. Repair: {SHAPE}."
            ))),
        })
        .collect()
}

/// Whether `presented` is the token, in time that depends on neither value: both are hashed
/// first, so even their lengths stay hidden, and the digests are compared with `subtle`.
pub fn token_matches(presented: &str, token: &str) -> bool {
    use sha2::{Digest, Sha256};
    use subtle::ConstantTimeEq;
    let a = Sha256::digest(presented.as_bytes());
    let b = Sha256::digest(token.as_bytes());
    bool::from(a.as_slice().ct_eq(b.as_slice()))
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

    /// The response hyper writes; `keep_alive: false` adds `Connection: close`.
    fn into_hyper(self, keep_alive: bool) -> hyper::Response<Full<Bytes>> {
        let mut out = hyper::Response::new(Full::new(Bytes::from(String::from(Box::<str>::from(
            self.body,
        )))));
        *out.status_mut() = hyper::StatusCode::from_u16(self.status)
            .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
        let headers = out.headers_mut();
        headers.insert(
            hyper::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            hyper::header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        );
        if keep_alive {
            headers.insert("keep-alive", HeaderValue::from_static(KEEP_ALIVE_HINT));
        } else {
            headers.insert(CONNECTION, HeaderValue::from_static("close"));
        }
        for (name, value) in self.headers {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.append(name, value);
            }
        }
        out
    }
}

fn bad_request(message: impl Into<String>) -> Response {
    Response::error(400, ErrorCode::InvalidParams.as_str(), message)
}

/// Which RPC method a path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Snapshot,
    Restore,
}

/// The checks that need only the head, in order: token, path, method. `authorization` holds
/// every `Authorization` header value (exactly one is accepted).
pub fn check_request(
    method: &str,
    path: &str,
    authorization: &[&str],
    token: &str,
) -> std::result::Result<Method, Response> {
    let presented = match authorization {
        [v] => v
            .trim()
            .split_once(' ')
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim()),
        _ => None,
    };
    if !presented.is_some_and(|t| token_matches(t, token)) {
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
    let rpc = match path {
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
    if method != "POST" {
        return Err(Response::error(
            405,
            "method_not_allowed",
            format!("{method} is not allowed on {path}. Repair: use POST with a JSON body."),
        )
        .with_header("Allow", "POST"));
    }
    Ok(rpc)
}

/// Whether the client asked to keep the connection (`Connection: keep-alive`).
fn wants_keep_alive(headers: &hyper::HeaderMap) -> bool {
    headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case("keep-alive"))
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
    let mut builder = listen::builder(HEAD_TIMEOUT);
    builder
        .max_header_size(MAX_HEAD)
        // Header names go out as `Content-Length`, as HTTP/1.1 clients and the old server wrote them.
        .title_case_headers(true);
    let rules = listen::Rules {
        name: "threadbase http",
        max_connections: MAX_CONNECTIONS,
        drain: DRAIN_TIMEOUT,
        linger: Some(listen::Linger {
            time: LINGER,
            bytes: LINGER_BYTES,
        }),
        builder,
    };
    let (stop, _) = watch::channel(false);
    listen::serve(listener, rules, stop, shutdown, move |req| {
        let token = token.clone();
        let rpc = rpc.clone();
        async move { answer(req, &token, rpc).await }
    })
    .await
}

/// One request: the head checks, the body, the method.
async fn answer(
    req: hyper::Request<Incoming>,
    token: &str,
    rpc: Arc<dyn WorkerRpc>,
) -> hyper::Response<Full<Bytes>> {
    let keep_alive = wants_keep_alive(req.headers());
    // A value with bytes that are not visible ASCII is compared as it is (and cannot match).
    let authorization: Vec<String> = req
        .headers()
        .get_all(AUTHORIZATION)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect();
    let authorization: Vec<&str> = authorization.iter().map(String::as_str).collect();
    let checked = check_request(
        req.method().as_str(),
        req.uri().path(),
        &authorization,
        token,
    );
    let response = match checked {
        Err(r) => r,
        Ok(method) => match read_body(req.into_body()).await {
            Err(r) => r,
            Ok(body) => call(method, &body, rpc).await,
        },
    };
    tracing::debug!(status = response.status, "answered");
    response.into_hyper(keep_alive)
}

/// The whole body, at most [`MAX_BODY`] bytes: a declared length over it is refused before
/// anything is read, a chunked body as soon as it passes it.
async fn read_body(body: Incoming) -> std::result::Result<Bytes, Response> {
    let declared = body.size_hint().exact();
    let too_large = |what: String| {
        Response::error(
            413,
            ErrorCode::Limit.as_str(),
            format!(
                "The body {what}; at most {MAX_BODY} are accepted. Repair: send at most {MAX_IDS} coordinator ids per request."
            ),
        )
    };
    if let Some(length) = declared.filter(|n| *n > MAX_BODY as u64) {
        return Err(too_large(format!("has {length} bytes")));
    }
    match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY).collect()).await {
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<LengthLimitError>() => {
            Err(too_large(format!("exceeds {MAX_BODY} bytes")))
        }
        Ok(Err(e)) => Err(match declared {
            Some(length) => bad_request(format!(
                "The body ended before its Content-Length ({length} bytes). Repair: send exactly Content-Length bytes."
            )),
            None => {
                let why = std::error::Error::source(&*e).map_or(e.to_string(), |s| s.to_string());
                bad_request(format!(
                    "The chunked body is malformed or ended before its last chunk ({why}). Repair: end it with a zero-length chunk, or send a Content-Length."
                ))
            }
        }),
        Err(_) => Err(Response::error(
            408,
            ErrorCode::InvalidParams.as_str(),
            "The request body took too long. Repair: send the whole request at once.",
        )),
    }
}

async fn call(method: Method, body: &[u8], rpc: Arc<dyn WorkerRpc>) -> Response {
    let ids = match parse_input(body) {
        Ok(ids) => ids,
        Err(e) => return Response::from_error(&e),
    };
    let answer = tokio::task::spawn_blocking(move || match method {
        Method::Snapshot => rpc.snapshot(&ids),
        Method::Restore => rpc.restore(&ids),
    })
    .await;
    match answer {
        Ok(Ok(v)) => Response::ok(v),
        Ok(Err(e)) => Response::from_error(&e),
        Err(_) => Response::error(
            500,
            ErrorCode::Internal.as_str(),
            "The request handler failed. Repair: retry; report a bug if it persists.",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checks_run_in_order() {
        let t = "secret-token";
        let status = |method: &str, path: &str, auth: &[&str]| {
            check_request(method, path, auth, t).unwrap_err().status
        };
        assert_eq!(status("GET", "/nope", &[]), 401);
        assert_eq!(status("POST", "/threads/snapshot", &["Bearer wrong"]), 401);
        assert_eq!(
            status("POST", "/threads/snapshot", &["Basic secret-token"]),
            401
        );
        assert_eq!(status("POST", "/threads/snapshot", &["Bearer"]), 401);
        assert_eq!(
            status(
                "POST",
                "/threads/snapshot",
                &["Bearer secret-token", "Bearer secret-token"]
            ),
            401
        );
        assert_eq!(status("GET", "/nope", &["Bearer secret-token"]), 404);
        assert_eq!(
            status("GET", "/threads/restore", &["bearer secret-token"]),
            405
        );
        assert_eq!(
            status("HEAD", "/threads/restore", &["Bearer  secret-token "]),
            405
        );
        assert_eq!(
            check_request("POST", "/threads/restore", &["Bearer secret-token"], t).unwrap(),
            Method::Restore
        );
        let r = check_request("POST", "/x", &[], t).unwrap_err();
        assert!(r
            .headers
            .iter()
            .any(|(n, v)| *n == "WWW-Authenticate" && v.starts_with("Bearer")));
        let r = check_request("PUT", "/threads/snapshot", &["Bearer secret-token"], t).unwrap_err();
        assert_eq!(r.headers, [("Allow", "POST".to_string())]);
    }
    #[test]
    fn parses_the_input_wrapper() {
        assert_eq!(
            parse_input(br#"{"input":{"coordinatorIDs":["ses_a","ses_b","ses_a"]}}"#).unwrap(),
            ["ses_a", "ses_b", "ses_a"].map(SessionId::new)
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
    fn tokens_compare_by_value() {
        assert!(token_matches("abc", "abc"));
        assert!(!token_matches("abc", "abd"));
        assert!(!token_matches("abc", "abcd"));
        assert!(!token_matches("", "a"));
        assert!(token_matches("", ""));
    }

    #[test]
    fn keep_alive_is_what_the_client_asked_for() {
        let headers = |values: &[&str]| {
            let mut h = hyper::HeaderMap::new();
            for v in values {
                h.append(CONNECTION, HeaderValue::from_str(v).unwrap());
            }
            h
        };
        assert!(!wants_keep_alive(&headers(&[])));
        assert!(!wants_keep_alive(&headers(&["close"])));
        assert!(wants_keep_alive(&headers(&["keep-alive"])));
        assert!(wants_keep_alive(&headers(&["Upgrade, Keep-Alive"])));
        assert!(wants_keep_alive(&headers(&["te", "keep-alive"])));
    }
}
