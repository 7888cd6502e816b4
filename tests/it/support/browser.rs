//! A real headless Chromium, driven through chromedriver's WebDriver HTTP API (plain HTTP/1.1
//! over a TcpStream: no client crate), and a `threadbase web` process to point it at.
//!
//! Without Debian's `chromium` and `chromium-driver` a browser test prints `SKIPPED` and
//! returns; under `CI=true` it fails (`.ci/run` installs both).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// One HTTP exchange on a fresh connection: status, headers (lower-case names), body.
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<(String, String)>, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    // Read the head, then as much body as Content-Length says (a server may keep the
    // connection open), else up to the end (or a chunked body's last chunk).
    let mut raw = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    let split = loop {
        if let Some(p) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        let n = s.read(&mut buf).expect("a response");
        assert!(n > 0, "the connection closed before a response head");
        raw.extend_from_slice(&buf[..n]);
    };
    let length = String::from_utf8_lossy(&raw[..split])
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok());
    loop {
        let have = raw.len() - split - 4;
        if length.is_some_and(|n| have >= n) || (length.is_none() && raw.ends_with(b"0\r\n\r\n")) {
            break;
        }
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) => panic!("reading the response: {e}"),
        }
    }
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    (status, headers, body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&b[..eol])
                .split(';')
                .next()
                .unwrap()
                .trim(),
            16,
        )
        .unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[eol + 2 + size + 2..];
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Whether the browser is here; when not, prints why (and fails under `CI=true`).
pub fn available(test: &str) -> bool {
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if missing.is_empty() {
        return true;
    }
    super::common::required_or_skip(
        test,
        "the browser",
        &format!("{missing:?} not installed (apt-get install -y chromium chromium-driver)"),
    );
    false
}

/// A headless Chromium session; the driver and the browser end on drop.
pub struct Browser {
    driver: Child,
    port: u16,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub fn start() -> Browser {
        let port = free_port();
        let profile = tempfile::tempdir().unwrap();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut b = Browser {
            driver,
            port,
            session: String::new(),
            _profile: profile,
        };
        let args = vec![
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1600,900".into(),
            format!("--user-data-dir={}", b._profile.path().display()),
        ];
        let v = b.call(
            "POST",
            "/session",
            Some(json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {"binary": CHROMIUM, "args": args}
            }}})),
        );
        b.session = v["sessionId"].as_str().expect("a session id").to_string();
        b
    }

    /// A WebDriver command; its `value`, or a panic with the driver's error.
    pub fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.try_call(method, path, body)
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"))
    }

    /// A WebDriver command; its `value`, or the driver's error.
    pub fn try_call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, Value> {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let (status, _, out) = http(
            self.port,
            method,
            path,
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        );
        let doc: Value = serde_json::from_slice(&out).unwrap_or(Value::Null);
        if status == 200 {
            Ok(doc["value"].clone())
        } else {
            Err(json!({"status": status, "value": doc["value"]}))
        }
    }

    fn at(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    pub fn goto(&self, url: &str) {
        self.call("POST", &self.at("/url"), Some(json!({ "url": url })));
    }

    /// Runs `script` (a function body: `return …`) in the page.
    pub fn eval(&self, script: &str) -> Value {
        self.call(
            "POST",
            &self.at("/execute/sync"),
            Some(json!({"script": script, "args": []})),
        )
    }

    /// Waits until `script` returns something truthy, and returns it.
    pub fn wait_for(&self, what: &str, script: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.eval(script);
            if !(v.is_null() || v == json!(false) || v == json!("") || v == json!(0)) {
                return v;
            }
            if Instant::now() > deadline {
                let text = self.eval("return document.body.innerText.slice(0, 3000)");
                panic!(
                    "timed out waiting for {what}; page:\n{}",
                    text.as_str().unwrap_or("")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Clicks the element `css` finds, as a user would (WebDriver's element click); found
    /// again if the page replaced it between the find and the click.
    pub fn click(&self, css: &str) {
        let mut tries = 0;
        loop {
            let el = self.call(
                "POST",
                &self.at("/element"),
                Some(json!({"using": "css selector", "value": css})),
            );
            let id = el
                .as_object()
                .and_then(|o| o.values().next())
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("no element {css}: {el}"))
                .to_string();
            match self.try_call(
                "POST",
                &self.at(&format!("/element/{id}/click")),
                Some(json!({})),
            ) {
                Ok(_) => return,
                Err(e) if tries < 5 && e["value"]["error"] == "stale element reference" => {
                    tries += 1;
                }
                Err(e) => panic!("clicking {css}: {e}"),
            }
        }
    }

    /// A PNG of the viewport, written to `file` (its folders made).
    pub fn screenshot(&self, file: &Path) {
        let b64 = self.call("GET", &self.at("/screenshot"), None);
        let png = base64_decode(b64.as_str().expect("base64"));
        assert!(png.starts_with(b"\x89PNG"), "not a PNG");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, png).unwrap();
    }

    /// The page's JavaScript heap in use (Chrome DevTools `Runtime.getHeapUsage`), in bytes.
    pub fn js_heap(&self) -> f64 {
        let v = self.call(
            "POST",
            &self.at("/goog/cdp/execute"),
            Some(json!({"cmd": "Runtime.getHeapUsage", "params": {}})),
        );
        v["usedSize"].as_f64().unwrap_or(-1.0)
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = http(
                self.port,
                "DELETE",
                &format!("/session/{}", self.session),
                &[],
                b"",
            );
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter_map(val) {
        acc = (acc << 6) | c;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// Where the tests leave their screenshots: `<target>/web-screenshots/`.
pub fn screenshot_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("web-screenshots")
}

/// A `threadbase web` process on `db` with `token`, stopped (SIGTERM) on drop.
pub struct Web {
    child: Child,
    pub port: u16,
    pub token: String,
}

impl Web {
    pub fn start(db: &Path, token: &str) -> Web {
        Web::start_with(db, &["--port", "0", "--token", token])
    }

    /// `threadbase --db DB web ARGS…` (no token in the environment); its port and token are
    /// read from the two lines it prints.
    pub fn start_with(db: &Path, args: &[&str]) -> Web {
        Web::start_env(db, args, &[])
    }

    /// `threadbase web` with `token` on host `host` (`THREADBASE_HOST_ID`), as a team member
    /// runs it.
    pub fn start_on_host(db: &Path, token: &str, host: &str) -> Web {
        Web::start_env(
            db,
            &["--port", "0", "--token", token],
            &[("THREADBASE_HOST_ID", host)],
        )
    }

    /// [`Web::start_with`] with `env` set.
    pub fn start_env(db: &Path, args: &[&str], env: &[(&str, &str)]) -> Web {
        let mut child = Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(db)
            .arg("web")
            .args(args)
            .env_remove("THREADBASE_DB")
            .env_remove("THREADBASE_TOKEN")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start threadbase web");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        let mut open = String::new();
        out.read_line(&mut open).unwrap();
        let token = open
            .trim()
            .rsplit_once("?token=")
            .map(|(_, t)| t.to_string())
            .unwrap_or_else(|| panic!("no token in {open:?}"));
        std::thread::spawn(move || {
            let mut sink = String::new();
            while out.read_line(&mut sink).is_ok_and(|n| n > 0) {
                sink.clear();
            }
        });
        Web { child, port, token }
    }

    /// The address that sets the token's cookie and opens the page.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/?token={}", self.port, self.token)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `GET path` with the bearer token: status and JSON body.
    pub fn get(&self, path: &str) -> (u16, Value) {
        let auth = format!("Bearer {}", self.token);
        let (status, _, body) = http(self.port, "GET", path, &[("Authorization", &auth)], b"");
        (status, serde_json::from_slice(&body).unwrap_or(Value::Null))
    }

    /// `POST path` with the bearer token and a JSON body: status and JSON answer.
    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let auth = format!("Bearer {}", self.token);
        let (status, _, out) = http(
            self.port,
            "POST",
            path,
            &[
                ("Authorization", &auth),
                ("Content-Type", "application/json"),
            ],
            body.to_string().as_bytes(),
        );
        (status, serde_json::from_slice(&out).unwrap_or(Value::Null))
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        // SAFETY-free: a signal to our own child by its pid.
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(self.child.id() as i32).unwrap(),
            rustix::process::Signal::TERM,
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
