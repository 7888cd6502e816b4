//! `threadbase web`: a live page over every root session's tree, on hyper, beside `threadbase
//! http` and with its rules for the token and the address.
//!
//! - `GET /` the page, `GET /assets/{app.js,app.css}` its script and style: embedded in the
//!   binary (`include_str!`), nothing from a CDN, no build step. `GET /?token=T` with the right
//!   token sets the cookie `threadbase_token` (`HttpOnly; SameSite=Strict`) and redirects to `/`,
//!   so the token leaves the address bar at once.
//! - `GET /api/trees`, `/api/rows`, `/api/thread`, `/api/usage`, `/api/command`: the reads
//!   ([`api`]), JSON from `Serialize` structs.
//! - `POST /api/action`: stop, force stop, send, archive ([`api::Action`]); a stop or a send is a
//!   `commands` row that the serve holding the thread carries out, as `top` writes it.
//! - `GET /api/events`: server-sent events ([`events`]), one `change` event each time the
//!   database's change counter moves; a reconnect with `Last-Event-ID` gets one at once if
//!   anything changed meanwhile.
//!
//! Every request but the assets needs the token, as `Authorization: Bearer T` or the cookie:
//! without it the answer is 401 and nothing is read or changed. A request that a browser marks
//! as coming from another site (`Origin` not this server, or `Sec-Fetch-Site` cross-site or
//! same-site) is refused with 403 before anything is read or changed. The order of checks is
//! token → origin → path → method → body.

pub mod api;
pub mod events;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE, COOKIE};
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::error::{Error, ErrorCode, Result};
use crate::serve::http::token_matches;
use crate::serve::listen;
use crate::serve::output::ErrorBody;
use crate::store::sessions::SessionInfo;
use crate::Store;

/// The cookie that keeps the token after `/?token=…`.
pub const COOKIE_NAME: &str = "threadbase_token";
/// Connections handled at once (open pages hold one each for their events).
pub const MAX_CONNECTIONS: usize = 64;
/// The largest accepted request body.
pub const MAX_BODY: usize = 1 << 20;
/// How long a client may take to send a request's head.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client may take to send a body.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long shutdown waits for requests in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// A response body: a whole one, or the event stream's channel.
pub type Body = Either<Full<Bytes>, http_body_util::channel::Channel<Bytes, Infallible>>;

/// What every request shares: the store, the token, the change hub, the stop signal.
pub struct Web {
    pub store: Arc<Store>,
    token: String,
    pub hub: events::Hub,
    stop: watch::Receiver<bool>,
    /// The root sessions' names and starts, read from their session files: kept for
    /// [`INFOS_FOR`] so a page's reads after every change do not read every session file.
    infos: std::sync::Mutex<Option<(std::time::Instant, Arc<Vec<SessionInfo>>)>>,
}

/// How long the root sessions' names are kept before their session files are read again (a
/// new root session is read at once).
pub const INFOS_FOR: Duration = Duration::from_secs(5);

impl Web {
    /// The root sessions (`store::sessions::infos`), newest first: the kept list while it is
    /// younger than [`INFOS_FOR`] and names every root in `roots`, else read again.
    pub fn session_infos(
        &self,
        conn: &crate::store::Conn,
        roots: &[&str],
    ) -> Result<Arc<Vec<SessionInfo>>> {
        let mut kept = self.infos.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, infos)) = kept.as_ref() {
            if at.elapsed() < INFOS_FOR
                && roots
                    .iter()
                    .all(|r| infos.iter().any(|i| i.root_session == *r))
            {
                return Ok(infos.clone());
            }
        }
        let infos = Arc::new(crate::store::sessions::infos(conn)?);
        *kept = Some((std::time::Instant::now(), infos.clone()));
        Ok(infos)
    }
}

/// A whole response with a content type.
fn whole(status: u16, content_type: &'static str, body: impl Into<Bytes>) -> hyper::Response<Body> {
    let mut out = hyper::Response::new(Either::Left(Full::new(body.into())));
    *out.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let h = out.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    out
}

/// A JSON answer from a `Serialize` value.
pub fn json<T: Serialize>(value: &T) -> hyper::Response<Body> {
    match serde_json::to_vec(value) {
        Ok(bytes) => whole(200, "application/json", bytes),
        Err(e) => error(&Error::internal(format!(
            "The answer could not be written ({e}). Repair: report a bug."
        ))),
    }
}

/// `{"error": {"code", "message"}}` with the status for its code.
pub fn error(e: &Error) -> hyper::Response<Body> {
    let status = match e.code {
        ErrorCode::InvalidParams => 400,
        ErrorCode::Forbidden => 403,
        ErrorCode::UnknownReference => 404,
        ErrorCode::Conflict | ErrorCode::Closed => 409,
        ErrorCode::Limit => 429,
        _ => 500,
    };
    error_with(status, e.code.as_str(), &e.message)
}

fn error_with(status: u16, code: &str, message: &str) -> hyper::Response<Body> {
    #[derive(Serialize)]
    struct Doc<'a> {
        error: ErrorBody<'a>,
    }
    let body = serde_json::to_vec(&Doc {
        error: ErrorBody { code, message },
    })
    .unwrap_or_default();
    whole(status, "application/json", body)
}

/// The 401 answer: JSON for the API, a short page for the browser's address bar.
fn unauthorized(path: &str, wrong: bool) -> hyper::Response<Body> {
    let what = if wrong {
        "Wrong token"
    } else {
        "Missing token"
    };
    let message = format!(
        "{what}. Repair: open the address `threadbase web` printed (it ends in ?token=…), or send Authorization: Bearer <token> with the token from --token or $THREADBASE_TOKEN."
    );
    let mut out = if path.starts_with("/api/") {
        error_with(401, ErrorCode::Forbidden.as_str(), &message)
    } else {
        whole(
            401,
            "text/html; charset=utf-8",
            format!(
                "<!doctype html><meta charset=utf-8><title>threadbase web</title><p>{}</p>",
                html_escape(&message)
            ),
        )
    };
    out.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"threadbase\""),
    );
    out
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The token a request presents: its one `Authorization: Bearer` header, else the cookie.
pub fn presented_token(headers: &hyper::HeaderMap) -> Option<String> {
    let auth: Vec<&HeaderValue> = headers.get_all(AUTHORIZATION).iter().collect();
    if let [v] = auth.as_slice() {
        let v = String::from_utf8_lossy(v.as_bytes());
        if let Some((scheme, t)) = v.trim().split_once(' ') {
            if scheme.eq_ignore_ascii_case("bearer") {
                return Some(t.trim().to_string());
            }
        }
        return Some(String::new());
    }
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.to_string())
}

/// Why a request is refused as cross-site, if it is: an `Origin` that is not this server's
/// (`http://` + the request's `Host`), or a `Sec-Fetch-Site` that is neither same-origin nor
/// none (typed in the address bar).
pub fn cross_site(headers: &hyper::HeaderMap) -> Option<String> {
    let host = headers
        .get(hyper::header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if let Some(origin) = headers.get(hyper::header::ORIGIN) {
        let origin = String::from_utf8_lossy(origin.as_bytes());
        if origin != format!("http://{host}") {
            return Some(format!(
                "Cross-site request refused: Origin {origin:?} is not this server (http://{host}). Repair: use the page this server serves, or a client that sends no Origin."
            ));
        }
    }
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if !matches!(site, "same-origin" | "none") {
            return Some(format!(
                "Cross-site request refused (Sec-Fetch-Site: {site}). Repair: use the page this server serves."
            ));
        }
    }
    None
}

/// The value of query parameter `name` (percent-decoded, `+` as a space).
pub fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    query?
        .split('&')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k) == name).then(|| percent_decode(v))
        })
        .next()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl Web {
    /// One request, through the checks in order.
    async fn answer(self: Arc<Self>, req: hyper::Request<Incoming>) -> hyper::Response<Body> {
        let path = req.uri().path().to_string();
        let query = req.uri().query().map(str::to_string);
        let method = req.method().clone();
        // The assets hold no data: no token needed.
        match path.as_str() {
            "/assets/app.js" => return whole(200, "text/javascript; charset=utf-8", APP_JS),
            "/assets/app.css" => return whole(200, "text/css; charset=utf-8", APP_CSS),
            "/favicon.ico" => return whole(204, "text/plain", ""),
            _ => {}
        }
        // The page with ?token=: keep it in the cookie and take it out of the address.
        if path == "/" {
            if let Some(t) = query_param(query.as_deref(), "token") {
                if !token_matches(&t, &self.token) {
                    return unauthorized(&path, true);
                }
                let mut out = whole(303, "text/plain", "");
                let h = out.headers_mut();
                h.insert(hyper::header::LOCATION, HeaderValue::from_static("/"));
                if let Ok(v) = HeaderValue::from_str(&format!(
                    "{COOKIE_NAME}={t}; HttpOnly; SameSite=Strict; Path=/"
                )) {
                    h.insert(hyper::header::SET_COOKIE, v);
                }
                return out;
            }
        }
        match presented_token(req.headers()) {
            Some(t) if token_matches(&t, &self.token) => {}
            Some(_) => return unauthorized(&path, true),
            None => return unauthorized(&path, false),
        }
        if let Some(why) = cross_site(req.headers()) {
            return error_with(403, ErrorCode::Forbidden.as_str(), &why);
        }
        let get = method == hyper::Method::GET;
        let route = path.as_str();
        let known = matches!(
            route,
            "/" | "/api/trees"
                | "/api/rows"
                | "/api/thread"
                | "/api/timeline"
                | "/api/usage"
                | "/api/command"
                | "/api/events"
                | "/api/action"
        );
        if !known {
            return error_with(
                404,
                "not_found",
                &format!(
                    "No such page {route:?}. Repair: open / or use the /api/ paths the page uses."
                ),
            );
        }
        let want_post = route == "/api/action";
        if want_post != (method == hyper::Method::POST) || (!want_post && !get) {
            let allow = if want_post { "POST" } else { "GET" };
            let mut out = error_with(
                405,
                "method_not_allowed",
                &format!("{method} is not allowed on {route}. Repair: use {allow}."),
            );
            out.headers_mut()
                .insert(hyper::header::ALLOW, HeaderValue::from_static(allow));
            return out;
        }
        let q = query.as_deref();
        match route {
            "/" => whole(200, "text/html; charset=utf-8", INDEX_HTML),
            "/api/events" => {
                let last = req
                    .headers()
                    .get("last-event-id")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
                    .or_else(|| query_param(q, "lastEventId"));
                events::stream(&self.hub, last, self.stop.clone())
            }
            "/api/action" => {
                let body = match read_body(req.into_body()).await {
                    Ok(b) => b,
                    Err(e) => return e,
                };
                let me = self.clone();
                blocking(move || api::action(&me.store, &body)).await
            }
            _ => {
                let me = self.clone();
                let route = route.to_string();
                let q = query.clone();
                blocking(move || api::read(&me, &route, q.as_deref())).await
            }
        }
    }
}

/// Runs a read or a write on a blocking thread; its error becomes its JSON answer.
async fn blocking(
    f: impl FnOnce() -> Result<hyper::Response<Body>> + Send + 'static,
) -> hyper::Response<Body> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => error(&e),
        Err(_) => error(&Error::internal(
            "The request handler failed. Repair: retry; report a bug if it persists.",
        )),
    }
}

/// The whole body, at most [`MAX_BODY`] bytes.
async fn read_body(body: Incoming) -> std::result::Result<Bytes, hyper::Response<Body>> {
    match tokio::time::timeout(BODY_TIMEOUT, Limited::new(body, MAX_BODY).collect()).await {
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(_)) => Err(error_with(
            413,
            ErrorCode::Limit.as_str(),
            &format!("The body is cut short or over {MAX_BODY} bytes. Repair: send one action as a small JSON object."),
        )),
        Err(_) => Err(error_with(
            408,
            ErrorCode::InvalidParams.as_str(),
            "The request body took too long. Repair: send the whole request at once.",
        )),
    }
}

/// Serves the page on `listener` until `shutdown` completes; the change hub watches `store`.
pub async fn serve(
    listener: TcpListener,
    store: Arc<Store>,
    token: String,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let (stop, stop_rx) = watch::channel(false);
    let hub = events::Hub::start(&store, stop_rx.clone())?;
    let web = Arc::new(Web {
        store,
        token,
        hub,
        stop: stop_rx,
        infos: std::sync::Mutex::new(None),
    });
    let mut builder = listen::builder(HEAD_TIMEOUT);
    builder.max_buf_size(64 * 1024);
    let rules = listen::Rules {
        name: "threadbase web",
        max_connections: MAX_CONNECTIONS,
        drain: DRAIN_TIMEOUT,
        linger: None,
        builder,
    };
    listen::serve(listener, rules, stop, shutdown, move |req| {
        web.clone().answer(req)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> hyper::HeaderMap {
        let mut h = hyper::HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_token_comes_from_the_bearer_header_or_the_cookie() {
        assert_eq!(presented_token(&headers(&[])), None);
        assert_eq!(
            presented_token(&headers(&[("authorization", "Bearer abc")])).as_deref(),
            Some("abc")
        );
        assert_eq!(
            presented_token(&headers(&[("authorization", "Basic abc")])).as_deref(),
            Some("")
        );
        assert_eq!(
            presented_token(&headers(&[("cookie", "a=1; threadbase_token=xyz; b=2")])).as_deref(),
            Some("xyz")
        );
        assert_eq!(presented_token(&headers(&[("cookie", "a=1")])), None);
    }

    #[test]
    fn cross_site_requests_are_named() {
        assert!(cross_site(&headers(&[("host", "127.0.0.1:80")])).is_none());
        assert!(cross_site(&headers(&[
            ("host", "127.0.0.1:80"),
            ("origin", "http://127.0.0.1:80"),
            ("sec-fetch-site", "same-origin"),
        ]))
        .is_none());
        let why = cross_site(&headers(&[
            ("host", "127.0.0.1:80"),
            ("origin", "http://evil.example"),
        ]))
        .unwrap();
        assert!(why.contains("Repair:"), "{why}");
        assert!(cross_site(&headers(&[
            ("host", "127.0.0.1:80"),
            ("sec-fetch-site", "cross-site")
        ]))
        .is_some());
        assert!(cross_site(&headers(&[
            ("host", "127.0.0.1:80"),
            ("sec-fetch-site", "same-site")
        ]))
        .is_some());
    }

    #[test]
    fn query_parameters_are_decoded() {
        assert_eq!(
            query_param(Some("a=1&match=%2Froot%2Fa_*&x"), "match").as_deref(),
            Some("/root/a_*")
        );
        assert_eq!(query_param(Some("q=a+b"), "q").as_deref(), Some("a b"));
        assert_eq!(query_param(Some("q=%zz%4"), "q").as_deref(), Some("%zz%4"));
        assert_eq!(query_param(Some("q=%"), "q").as_deref(), Some("%"));
        assert_eq!(query_param(None, "q"), None);
        assert_eq!(query_param(Some("x=1"), "q"), None);
    }
}
