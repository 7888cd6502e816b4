//! `threadbase http` as a real process: the threads RPC (snapshot, restore) over raw HTTP/1.1,
//! bearer-token auth, input validation, limits, loopback-only listening and graceful exit.

use crate::support::common;
use threadbase::domain::{Phase, SessionId, ThreadStatus};

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use threadbase::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec, NewThread};
use threadbase::Store;

/// A running `threadbase http`; killed on drop.
struct Server {
    child: Child,
    addr: String,
    /// The second line it printed: `token file: PATH` or `token: $THREADBASE_HTTP_TOKEN`.
    token_line: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn token_file(&self) -> PathBuf {
        PathBuf::from(
            self.token_line
                .strip_prefix("token file: ")
                .expect("a token file line"),
        )
    }

    fn token(&self) -> String {
        std::fs::read_to_string(self.token_file())
            .unwrap()
            .trim()
            .to_string()
    }
}

fn http_command(db: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_threadbase"));
    cmd.arg("--db")
        .arg(db)
        .arg("http")
        .args(args)
        .env_remove("THREADBASE_DB")
        .env_remove("THREADBASE_HTTP_TOKEN");
    cmd
}

fn start(db: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
    let mut cmd = http_command(db, &["--listen", "127.0.0.1:0"]);
    cmd.args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("start threadbase http");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    let mut second = String::new();
    let mut third = String::new();
    out.read_line(&mut first).unwrap();
    out.read_line(&mut second).unwrap();
    out.read_line(&mut third).unwrap();
    // It says plainly that it answers the worker contract only.
    assert!(
        third.starts_with("serves the worker contract only")
            && third.contains("`thread` or `agent_*` session"),
        "unexpected third line {third:?}"
    );
    let addr = first
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_string();
    Server {
        child,
        addr,
        token_line: second.trim().to_string(),
    }
}

/// Sends raw bytes, reads the whole response; returns the status and the JSON body.
fn raw(addr: &str, request: &[u8]) -> (u16, Value, String) {
    let mut s = connect(addr);
    s.write_all(request).unwrap();
    read_rest(&mut s)
}

/// A connection to `addr` whose reads time out after 20 s.
fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Reads to the end of the connection and parses what came as one response.
fn read_rest(s: &mut TcpStream) -> (u16, Value, String) {
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    parse_response(&buf)
}

fn parse_response(buf: &[u8]) -> (u16, Value, String) {
    let text = String::from_utf8_lossy(buf).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {text:?}"));
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.parse().ok())
        .expect("Content-Length");
    assert_eq!(length, body.len(), "Content-Length matches the body");
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap_or_else(|e| panic!("body {body:?}: {e}"))
    };
    (status, body, head.to_string())
}

fn post(addr: &str, path: &str, token: Option<&str>, body: &str) -> (u16, Value) {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (status, body, _) = raw(addr, req.as_bytes());
    (status, body)
}

fn ids_body(ids: &[&str]) -> String {
    json!({"input": {"coordinatorIDs": ids}}).to_string()
}

fn error_code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

/// One worker row of coordinator `coord`.
struct Worker<'a> {
    id: &'a str,
    coord: &'a str,
    key: &'a str,
    title: Option<&'a str>,
    agent: Option<&'a str>,
    outcome: Option<&'a str>,
    hidden: Option<bool>,
    verdict: Option<&'a str>,
}

const W: Worker<'static> = Worker {
    id: "",
    coord: "",
    key: "",
    title: None,
    agent: None,
    outcome: None,
    hidden: None,
    verdict: None,
};

fn seed(db: &Path, workers: &[Worker<'_>]) {
    let store = Store::open(db).unwrap();
    store
        .write(|tx| {
            for w in workers {
                let manager = upsert_manager(
                    tx,
                    &ManagerSpec {
                        cwd: Some("/work"),
                        ..common::manager_spec(&SessionId::new(w.coord), Contract::Worker, "/root", None)
                    },
                )?;
                insert_thread(
                    tx,
                    &NewThread {
                        id: w.id.into(),
                        manager_id: manager,
                        path: format!("/{}", w.id),
                        parent_path: None,
                        parent_id: None,
                        task_name: w.id.into(),
                        name: w.key.into(),
                        depth: 0,
                        cwd: format!("/work/{}", w.key),
                        args: vec![],
                        status: ThreadStatus::Live,
                        phase: Phase::Idle,
                        session_id: Some(w.id.into()),
                        coordinator_id: Some(w.coord.into()),
                        spawn_key: Some(w.key.into()),
                        title: w.title.map(Into::into),
                        agent: w.agent.map(Into::into),
                        ..Default::default()
                    },
                )?;
                tx.execute_script(&crate::support::sql::with(
                    "UPDATE threads SET outcome = ?2, hidden = ?3 WHERE id = ?1",
                    rusqlite::params![w.id, w.outcome, w.hidden]))?;
                if let Some(verdict) = w.verdict {
                    tx.execute_script(&crate::support::sql::with(
                        "INSERT INTO reports (worker_id, verdict, summary, evidence, message_id, created_at)
                         VALUES (?1, ?2, 'summary of ' || ?1, '[\"cargo test\",\"ok\"]', 'msg_r', '2026-01-01T00:00:00.000Z')",
                        rusqlite::params![w.id, verdict]))?;
                }
            }
            Ok(())
        })
        .unwrap();
}

fn standard_seed(db: &Path) {
    seed(
        db,
        &[
            Worker {
                id: "ses_w1",
                coord: "ses_a",
                key: "alpha",
                title: Some("Alpha work"),
                agent: Some("reviewer"),
                outcome: Some("succeeded"),
                ..W
            },
            Worker {
                id: "ses_w2",
                coord: "ses_a",
                key: "beta",
                outcome: Some("succeeded"),
                verdict: Some("PASS"),
                ..W
            },
            Worker {
                id: "ses_w3",
                coord: "ses_a",
                key: "gamma",
                hidden: Some(true),
                verdict: Some("FAIL"),
                outcome: Some("failed"),
                ..W
            },
            Worker {
                id: "ses_w4",
                coord: "ses_a",
                key: "delta",
                hidden: Some(false),
                verdict: Some("PASS WITH NOTES"),
                ..W
            },
            Worker {
                id: "ses_w5",
                coord: "ses_b",
                key: "one",
                hidden: Some(true),
                outcome: Some("interrupted"),
                ..W
            },
            Worker {
                id: "ses_w6",
                coord: "ses_other",
                key: "untouched",
                hidden: Some(true),
                ..W
            },
        ],
    );
}

/// A server whose database holds one worker, `ses_w` of coordinator `ses_c` (key `k`), and
/// its token.
fn one_worker_server(db: &Path) -> (Server, String) {
    let server = start(db, &[], &[]);
    seed(
        db,
        &[Worker {
            id: "ses_w",
            coord: "ses_c",
            key: "k",
            ..W
        }],
    );
    let token = server.token();
    (server, token)
}

/// (workerID, hidden) of each worker, sorted by workerID (the order of the list is the
/// engine's: oldest first).
fn hidden_of(body: &Value) -> Vec<(String, bool)> {
    let mut v: Vec<(String, bool)> = body["workers"]
        .as_array()
        .expect("workers array")
        .iter()
        .map(|w| {
            (
                w["workerID"].as_str().unwrap().to_string(),
                w["hidden"].as_bool().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

fn pairs(v: &[(&str, bool)]) -> Vec<(String, bool)> {
    let mut v: Vec<(String, bool)> = v.iter().map(|(a, b)| (a.to_string(), *b)).collect();
    v.sort();
    v
}

#[test]
fn snapshot_and_restore_with_the_token() {
    let db = common::temp_db();
    let server = start(&db.path, &[], &[]);
    standard_seed(&db.path);
    let token = server.token();
    assert_eq!(token.len(), 32);
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(
        server.token_file(),
        threadbase::cli::beside_database(&db.path, "threadbase-http.token")
    );

    let (status, body) = post(
        &server.addr,
        "/threads/snapshot",
        Some(&token),
        &ids_body(&["ses_a", "ses_b", "ses_a", "ses_missing"]),
    );
    assert_eq!(status, 200, "{body}");
    // Repeated and unknown ids add nothing.
    assert_eq!(
        hidden_of(&body),
        pairs(&[
            ("ses_w1", false),
            ("ses_w2", true),
            ("ses_w4", false),
            ("ses_w3", true),
            ("ses_w5", true),
        ])
    );
    let w1 = &body["workers"][0];
    assert_eq!(
        *w1,
        json!({
            "workerID": "ses_w1", "coordinatorID": "ses_a", "key": "alpha", "title": "Alpha work",
            "directory": "/work/alpha", "agent": "reviewer", "model": null, "outcome": "succeeded",
            "report": null, "hidden": false
        })
    );
    assert_eq!(common::keys(w1), common::WORKER_VIEW_KEYS);
    let w2 = &body["workers"][1];
    assert_eq!(w2["title"], "beta", "title falls back to the key");
    assert_eq!(w2["agent"], Value::Null);
    assert_eq!(
        w2["report"],
        json!({"verdict": "PASS", "summary": "summary of ses_w2", "evidence": ["cargo test", "ok"]})
    );

    // Snapshot is read-only.
    let (_, again) = post(
        &server.addr,
        "/threads/snapshot",
        Some(&token),
        &ids_body(&["ses_a", "ses_b"]),
    );
    assert_eq!(again, body);

    // Restore: every hidden worker of the given coordinators shows again (even a PASS one).
    let (status, restored) = post(
        &server.addr,
        "/threads/restore",
        Some(&token),
        &ids_body(&["ses_a", "ses_b"]),
    );
    assert_eq!(status, 200, "{restored}");
    assert_eq!(
        hidden_of(&restored),
        pairs(&[
            ("ses_w1", false),
            ("ses_w2", false),
            ("ses_w4", false),
            ("ses_w3", false),
            ("ses_w5", false),
        ])
    );
    assert_eq!(restored["workers"][1]["report"]["verdict"], "PASS");

    // The database holds it: the override is now 0 for the hidden ones, NULL stays NULL for
    // the one that was never hidden, and other coordinators are untouched.
    let hidden: Vec<(String, Option<i64>)> = common::pairs(
        &crate::support::sql::Conn::open(&db.path).unwrap(),
        "SELECT id, hidden FROM threads ORDER BY id",
    );
    assert_eq!(
        hidden,
        [
            ("ses_w1".to_string(), None),
            ("ses_w2".to_string(), Some(0)),
            ("ses_w3".to_string(), Some(0)),
            ("ses_w4".to_string(), Some(0)),
            ("ses_w5".to_string(), Some(0)),
            ("ses_w6".to_string(), Some(1)),
        ]
    );
    let (_, other) = post(
        &server.addr,
        "/threads/snapshot",
        Some(&token),
        &ids_body(&["ses_other"]),
    );
    assert_eq!(hidden_of(&other), pairs(&[("ses_w6", true)]));

    // No workers: an empty list, not an error.
    let (status, none) = post(
        &server.addr,
        "/threads/restore",
        Some(&token),
        &ids_body(&["ses_nobody"]),
    );
    assert_eq!((status, none), (200, json!({"workers": []})));
}

#[test]
fn tokens_are_required_and_compared() {
    let db = common::temp_db();
    let server = start(&db.path, &[], &[]);
    let token = server.token();
    let body = ids_body(&["ses_a"]);
    for (path, tok) in [
        ("/threads/snapshot", None),
        ("/threads/snapshot", Some("0".repeat(32))),
        ("/threads/restore", Some(format!("{token}x"))),
        ("/threads/restore", Some(token[..31].to_string())),
        ("/elsewhere", None),
    ] {
        let (status, resp) = post(&server.addr, path, tok.as_deref(), &body);
        assert_eq!(status, 401, "{path} {tok:?}: {resp}");
        assert_eq!(error_code(&resp), "forbidden");
        let msg = resp["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("Repair: send Authorization: Bearer <token>"),
            "{msg}"
        );
        assert!(!msg.contains(&token), "the token never appears in errors");
    }
    // A non-Bearer scheme is refused; the scheme name itself is case-insensitive.
    let req = format!(
        "POST /threads/snapshot HTTP/1.1\r\nAuthorization: Basic {token}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let (status, _, head) = raw(&server.addr, req.as_bytes());
    assert_eq!(status, 401);
    // Header names are case-insensitive; hyper writes this one `Www-Authenticate`.
    assert!(
        head.to_ascii_lowercase()
            .contains("\r\nwww-authenticate: bearer"),
        "{head}"
    );
    let req = format!(
        "POST /threads/snapshot HTTP/1.1\r\nauthorization: bearer {token}\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    assert_eq!(raw(&server.addr, req.as_bytes()).0, 200);

    // The generated token file is private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(server.token_file())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn bad_requests_get_their_status_codes() {
    let db = common::temp_db();
    let server = start(&db.path, &[], &[]);
    let token = server.token();
    let t = Some(token.as_str());
    let a = server.addr.as_str();

    let hundred: Vec<String> = (0..100).map(|i| format!("ses_{i}")).collect();
    let ok = json!({"input": {"coordinatorIDs": hundred}}).to_string();
    assert_eq!(post(a, "/threads/snapshot", t, &ok).0, 200);
    let many: Vec<String> = (0..101).map(|i| format!("ses_{i}")).collect();
    let too_many = json!({"input": {"coordinatorIDs": many}}).to_string();

    for body in [
        too_many.as_str(),
        r#"{"coordinatorIDs":["ses_a"]}"#,
        r#"{"input":{"coordinatorIDs":[]}}"#,
        r#"{"input":{"coordinatorIDs":"ses_a"}}"#,
        r#"{"input":{"coordinatorIDs":[7]}}"#,
        r#"{"input":{"coordinatorIDs":["ses_a"],"extra":true}}"#,
        r#"{"input":"#,
        "not json",
        "",
    ] {
        for path in ["/threads/snapshot", "/threads/restore"] {
            let (status, resp) = post(a, path, t, body);
            assert_eq!(status, 400, "{path} {body:?}: {resp}");
            assert_eq!(error_code(&resp), "invalid_params", "{resp}");
            assert!(
                resp["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("Repair:"),
                "{resp}"
            );
        }
    }
    let (_, resp) = post(a, "/threads/snapshot", t, &too_many);
    assert!(
        resp["error"]["message"].as_str().unwrap().contains("100"),
        "{resp}"
    );

    // Unknown path → 404; wrong method → 405 with Allow.
    let (status, resp) = post(a, "/threads/list", t, &ids_body(&["ses_a"]));
    assert_eq!(status, 404, "{resp}");
    let req = format!("GET /threads/snapshot HTTP/1.1\r\nAuthorization: Bearer {token}\r\n\r\n");
    let (status, resp, head) = raw(a, req.as_bytes());
    assert_eq!(status, 405, "{resp}");
    assert!(head.contains("Allow: POST"), "{head}");

    // Malformed heads are 400; the server stays up.
    for junk in [
        &b"\x00\x01\x02 garbage\r\n\r\n"[..],
        b"POST /threads/snapshot\r\n\r\n",
        b"POST /threads/snapshot HTTP/1.1\r\nno-colon-here\r\n\r\n",
    ] {
        let (status, _, _) = raw(a, junk);
        assert_eq!(status, 400, "{junk:?}");
    }
    // Framing is part of the head (hyper checks it as it parses), so a broken Content-Length
    // is 400 with or without the token.
    let bad_length = "POST /threads/snapshot HTTP/1.1\r\nContent-Length: abc\r\n\r\n";
    assert_eq!(raw(a, bad_length.as_bytes()).0, 400);
    let bad_length = format!(
        "POST /threads/snapshot HTTP/1.1\r\nAuthorization: Bearer {token}\r\nContent-Length: abc\r\n\r\n"
    );
    assert_eq!(raw(a, bad_length.as_bytes()).0, 400);
    // A client that connects and leaves, or sends half a head and leaves.
    drop(TcpStream::connect(a).unwrap());
    let mut half = TcpStream::connect(a).unwrap();
    half.write_all(b"POST /threads/snap").unwrap();
    half.shutdown(Shutdown::Write).unwrap();
    let mut sink = Vec::new();
    let _ = half.read_to_end(&mut sink);
    // A body shorter than its Content-Length.
    let mut short = TcpStream::connect(a).unwrap();
    let req = format!(
        "POST /threads/snapshot HTTP/1.1\r\nAuthorization: Bearer {token}\r\nContent-Length: 50\r\n\r\n{{\"input\""
    );
    short.write_all(req.as_bytes()).unwrap();
    short.shutdown(Shutdown::Write).unwrap();
    assert_eq!(read_rest(&mut short).0, 400);
    // A head over 16 KiB.
    let long = format!(
        "POST /threads/snapshot HTTP/1.1\r\nX-Long: {}\r\n\r\n",
        "a".repeat(20_000)
    );
    assert_eq!(raw(a, long.as_bytes()).0, 431);

    // A body over 1 MiB is refused from its Content-Length, before it is read.
    let big = 2 * 1024 * 1024;
    let mut s = connect(a);
    let head = format!(
        "POST /threads/snapshot HTTP/1.1\r\nAuthorization: Bearer {token}\r\nContent-Length: {big}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut writer = s.try_clone().unwrap();
    let pump = std::thread::spawn(move || {
        let chunk = vec![b' '; 64 * 1024];
        for _ in 0..(big / chunk.len()) {
            if writer.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    pump.join().unwrap();
    let (status, resp, _) = parse_response(&buf);
    assert_eq!(status, 413, "{resp}");
    // Exactly 1 MiB is within the limit (and then just bad JSON here).
    let body = " ".repeat(1024 * 1024);
    assert_eq!(post(a, "/threads/snapshot", t, &body).0, 400);
    // A chunked body is read like any other: an empty one is just not JSON (see
    // `chunked_bodies_work` for the rest).
    let req = format!(
        "POST /threads/snapshot HTTP/1.1\r\nAuthorization: Bearer {token}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    );
    assert_eq!(raw(a, req.as_bytes()).0, 400);

    // Still serving.
    assert_eq!(
        post(a, "/threads/snapshot", t, &ids_body(&["ses_a"])),
        (200, json!({"workers": []}))
    );
}

/// A chunked request (`Transfer-Encoding: chunked`) with `chunks` as its chunks, each with a
/// chunk extension, and a trailer.
fn chunked_request(path: &str, token: &str, extra_headers: &str, chunks: &[&str]) -> String {
    let mut req = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n{extra_headers}Transfer-Encoding: chunked\r\n\r\n"
    );
    for c in chunks {
        req.push_str(&format!("{:x};note=1\r\n{c}\r\n", c.len()));
    }
    req.push_str("0\r\nX-Trailer: done\r\n\r\n");
    req
}

#[test]
fn chunked_bodies_work() {
    let db = common::temp_db();
    let (server, token) = one_worker_server(&db.path);
    let a = server.addr.as_str();
    let body = ids_body(&["ses_c"]);
    let (first, rest) = body.split_at(7);
    let (second, third) = rest.split_at(9);

    // Several chunks, with extensions and a trailer.
    let req = chunked_request("/threads/snapshot", &token, "", &[first, second, third]);
    let (status, resp, head) = raw(a, req.as_bytes());
    assert_eq!(status, 200, "{resp}");
    assert_eq!(resp["workers"][0]["workerID"], "ses_w");
    assert!(head.contains("Connection: close"), "{head}");

    // Chunks arriving in separate writes, after `100 Continue`.
    let mut s = connect(a);
    let req = chunked_request(
        "/threads/restore",
        &token,
        "Expect: 100-continue\r\n",
        &[first, second, third],
    );
    let (head, chunks) = req.split_at(req.find("\r\n\r\n").unwrap() + 4);
    s.write_all(head.as_bytes()).unwrap();
    let mut interim = [0u8; 25];
    s.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    for piece in chunks.as_bytes().chunks(6) {
        s.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let (status, resp, _) = read_rest(&mut s);
    assert_eq!(status, 200, "{resp}");
    assert_eq!(resp["workers"][0]["workerID"], "ses_w");

    // The 1 MiB cap holds for chunked bodies, whatever the chunk sizes.
    let mib = " ".repeat(256 * 1024);
    let over = [mib.as_str(), &mib, &mib, &mib, "{}"];
    let req = chunked_request("/threads/snapshot", &token, "", &over);
    let mut s = connect(a);
    let mut writer = s.try_clone().unwrap();
    let pump = std::thread::spawn(move || {
        let _ = writer.write_all(req.as_bytes());
    });
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    pump.join().unwrap();
    let (status, resp, _) = parse_response(&buf);
    assert_eq!(status, 413, "{resp}");
    assert_eq!(error_code(&resp), "limit");
    assert!(resp["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Repair:"));
    // Exactly 1 MiB in chunks is within it (and then bad JSON).
    let at = [mib.as_str(), &mib, &mib, &mib];
    let req = chunked_request("/threads/snapshot", &token, "", &at);
    assert_eq!(raw(a, req.as_bytes()).0, 400);

    // A chunked body cut short, or with a broken chunk size, is 400 with a Repair: hint.
    for broken in [
        format!("POST /threads/snapshot HTTP/1.1\r\nAuthorization: Bearer {token}\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{{\"input\""),
        format!("POST /threads/snapshot HTTP/1.1\r\nAuthorization: Bearer {token}\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{{}}\r\n0\r\n\r\n"),
    ] {
        let mut s = connect(a);
        s.write_all(broken.as_bytes()).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let (status, resp, _) = read_rest(&mut s);
        assert_eq!(status, 400, "{broken:?}: {resp}");
        assert!(resp["error"]["message"].as_str().unwrap().contains("Repair:"), "{resp}");
    }
    // The token is still checked first.
    let req = chunked_request("/threads/snapshot", "wrong-token", "", &[&body]);
    assert_eq!(raw(a, req.as_bytes()).0, 401);
}

/// Reads exactly one response (head, then Content-Length bytes) from a kept-alive connection.
fn read_one_response(r: &mut BufReader<TcpStream>) -> (u16, Value, String) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "closed inside a head: {head:?}"
        );
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.parse().ok())
        .expect("Content-Length");
    let mut body = vec![0u8; length];
    r.read_exact(&mut body).unwrap();
    let mut whole = head.into_bytes();
    whole.extend_from_slice(&body);
    parse_response(&whole)
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let db = common::temp_db();
    let (server, token) = one_worker_server(&db.path);
    let body = ids_body(&["ses_c"]);
    let request = |path: &str, connection: &str, body: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: {connection}\r\nAuthorization: Bearer {token}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let s = connect(&server.addr);
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);

    // One after the other on the same connection.
    for path in ["/threads/snapshot", "/threads/restore", "/threads/snapshot"] {
        w.write_all(request(path, "keep-alive", &body).as_bytes())
            .unwrap();
        let (status, resp, head) = read_one_response(&mut r);
        assert_eq!(status, 200, "{path}: {resp}");
        assert_eq!(resp["workers"][0]["workerID"], "ses_w");
        assert!(!head.contains("Connection: close"), "{head}");
        assert!(head.contains("Keep-Alive: timeout=5"), "{head}");
    }
    // Pipelined: three requests in one write (one of them a client error, one chunked) get
    // three answers, in order.
    let pipelined = [
        request("/threads/snapshot", "keep-alive", &body),
        request("/threads/snapshot", "keep-alive", "not json"),
        chunked_request(
            "/threads/restore",
            &token,
            "Connection: keep-alive\r\n",
            &[&body],
        ),
    ]
    .concat();
    w.write_all(pipelined.as_bytes()).unwrap();
    let statuses: Vec<u16> = (0..3).map(|_| read_one_response(&mut r).0).collect();
    assert_eq!(statuses, [200, 400, 200]);
    // A request without keep-alive gets its answer and then the end of the connection.
    w.write_all(request("/threads/snapshot", "close", &body).as_bytes())
        .unwrap();
    let (status, _, head) = read_one_response(&mut r);
    assert_eq!(status, 200);
    assert!(head.contains("Connection: close"), "{head}");
    let mut rest = Vec::new();
    r.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn expect_continue_and_split_writes_work() {
    let db = common::temp_db();
    let (server, token) = one_worker_server(&db.path);
    let body = ids_body(&["ses_c"]);
    let mut s = connect(&server.addr);
    let head = format!(
        "POST /threads/snapshot HTTP/1.1\r\nAuthorization: Bearer {token}\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut interim = [0u8; 25];
    s.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    let (first, rest) = body.split_at(5);
    s.write_all(first.as_bytes()).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    s.write_all(rest.as_bytes()).unwrap();
    let (status, resp, _) = read_rest(&mut s);
    assert_eq!(status, 200);
    assert_eq!(resp["workers"][0]["workerID"], "ses_w");
}

#[test]
fn token_from_the_environment_and_a_chosen_token_file() {
    let db = common::temp_db();
    let token = "env-token-0123456789abcdef";
    let server = start(&db.path, &[], &[("THREADBASE_HTTP_TOKEN", token)]);
    assert_eq!(server.token_line, "token: $THREADBASE_HTTP_TOKEN");
    assert!(!db
        .path
        .parent()
        .unwrap()
        .join("threadbase-http.token")
        .exists());
    let (status, _) = post(
        &server.addr,
        "/threads/snapshot",
        Some(token),
        &ids_body(&["ses_a"]),
    );
    assert_eq!(status, 200);
    drop(server);

    // A too-short environment token is refused at start.
    let out = http_command(&db.path, &[])
        .env("THREADBASE_HTTP_TOKEN", "short")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Repair:"));

    // --token-file: written there with mode 0600, even over an existing world-readable file.
    use std::os::unix::fs::PermissionsExt;
    let file = db.dir.path().join("tokens").join("my.token");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "old").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let server = start(&db.path, &["--token-file", file.to_str().unwrap()], &[]);
    assert_eq!(server.token_file(), file);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let token = server.token();
    assert_eq!(token.len(), 32);
    let (status, _) = post(
        &server.addr,
        "/threads/snapshot",
        Some(&token),
        &ids_body(&["ses_a"]),
    );
    assert_eq!(status, 200);
}

#[test]
fn non_loopback_listen_needs_allow_remote() {
    let db = common::temp_db();
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let out = http_command(&db.path, &["--listen", addr])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{addr}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("error[invalid_params]"), "{err}");
        assert!(err.contains("not a loopback address"), "{err}");
        assert!(
            err.contains("Repair:") && err.contains("--allow-remote"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
    let out = http_command(&db.path, &["--listen", "not an address"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Repair:"));

    // With --allow-remote it starts.
    let mut cmd = http_command(&db.path, &["--listen", "0.0.0.0:0", "--allow-remote"]);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.starts_with("listening on http://0.0.0.0:"), "{line}");
}

#[test]
fn sigterm_stops_it_cleanly() {
    let db = common::temp_db();
    let mut server = start(&db.path, &[], &[]);
    let token = server.token();
    assert_eq!(
        post(
            &server.addr,
            "/threads/snapshot",
            Some(&token),
            &ids_body(&["ses_a"])
        )
        .0,
        200
    );
    let pid = rustix::process::Pid::from_raw(server.child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert!(
        TcpStream::connect(&server.addr).is_err(),
        "no longer listening"
    );
}

#[test]
fn worker_queries_use_the_spawn_key_index() {
    if crate::support::sql::sqlite_only(
        "worker_queries_use_the_spawn_key_index",
        "SQLite's EXPLAIN QUERY PLAN",
    ) {
        return;
    }
    let db = common::temp_db();
    let store = Store::open(&db.path).unwrap();
    let conn = store.read().unwrap();
    for sql in [
        include_str!("../../sql/workers_of_coordinators.sql"),
        include_str!("../../sql/workers_restore_hidden.sql"),
    ]
    .map(crate::support::common::expand_rows)
    {
        let sql = sql.as_str();
        let plan: Vec<String> = conn
            .sqlite()
            .unwrap()
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap()
            .query_map(
                rusqlite::named_params! {":ids": "[\"ses_a\"]", ":now": "x"}
                    .iter()
                    .filter(|(name, _)| sql.contains(name))
                    .copied()
                    .collect::<Vec<_>>()
                    .as_slice(),
                |r| r.get::<_, String>(3),
            )
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let plan = plan.join(" | ");
        assert!(
            plan.contains("USING INDEX threads_by_spawn_key (coordinator_id=?"),
            "{plan}"
        );
        assert!(
            !plan.contains("SCAN t ") && !plan.contains("SCAN threads"),
            "{plan}"
        );
    }
}
