//! A client for a real `threadbase serve` process: one request per line, responses matched by
//! id, notifications collected. Dropping it closes stdin (the server then stops its children).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use threadbase::domain::{Outcome, Phase, ThreadStatus};

use serde_json::{json, Value};

#[derive(Default)]
struct Inbox {
    responses: HashMap<u64, Value>,
    /// The snapshots of a compact list's part lines so far, by request.
    parts: HashMap<u64, Vec<Value>>,
    /// How many response lines carried each id (each request must get exactly one).
    answers: HashMap<u64, u32>,
    notifications: Vec<Value>,
    closed: bool,
}

pub struct Serve {
    pub child: Child,
    stdin: Option<ChildStdin>,
    inbox: Arc<(Mutex<Inbox>, Condvar)>,
    next: u64,
    pub stderr: Arc<Mutex<Vec<u8>>>,
}

/// The argv prefix that makes `serve` launch `threadbase scripted-agent --script <script>`.
pub fn scripted_command(script: &Path) -> String {
    json!([
        env!("CARGO_BIN_EXE_threadbase"),
        "scripted-agent",
        "--script",
        script.display().to_string()
    ])
    .to_string()
}

pub struct ServeSpec<'a> {
    pub db: &'a Path,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// Start serve from an empty environment plus `env` (hermetic real-Pi runs).
    pub clear_env: bool,
}

impl Serve {
    pub fn start(spec: ServeSpec<'_>) -> Serve {
        Serve::start_under(&[], spec)
    }

    /// [`Serve::start`] with the command run by `prefix` (say `unshare --pid --fork …`, a
    /// host of its own in the two-host tests).
    pub fn start_under(prefix: &[&str], spec: ServeSpec<'_>) -> Serve {
        let mut cmd = match prefix.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(env!("CARGO_BIN_EXE_threadbase"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_threadbase")),
        };
        cmd.arg("--db")
            .arg(spec.db)
            .arg("serve")
            .args(&spec.args)
            .current_dir(&spec.cwd);
        if spec.clear_env {
            cmd.env_clear();
        }
        for k in super::serve_env::INHERITED {
            cmd.env_remove(k);
        }
        cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn serve");
        let stdout = child.stdout.take().unwrap();
        let stderr_pipe = child.stderr.take().unwrap();
        let inbox: Arc<(Mutex<Inbox>, Condvar)> = Arc::default();
        let ib = inbox.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("serve wrote a non-JSON line {line:?}: {e}"));
                let (lock, cv) = &*ib;
                let mut inbox = lock.lock().unwrap();
                match v.get("id").and_then(Value::as_u64) {
                    // `--wire compact`: a part of a list, before its response line.
                    Some(id) if v.get("part").is_some() => {
                        let part = v["part"].as_array().expect("a part line's list").clone();
                        inbox.parts.entry(id).or_default().extend(part);
                    }
                    Some(id) if v.get("method").is_none() => {
                        *inbox.answers.entry(id).or_default() += 1;
                        let mut v = v;
                        // The list its part lines carried goes where the placeholder is, as the
                        // extension puts it (`snapshots` stays the placeholder).
                        let parts = inbox.parts.remove(&id).unwrap_or_default();
                        if let Some(details) = v.pointer_mut("/result/details") {
                            if details["kind"] == "listed" && details["threads"] == 0 {
                                details["threads"] = Value::Array(parts);
                            }
                        }
                        inbox.responses.insert(id, v);
                    }
                    _ => inbox.notifications.push(v),
                }
                cv.notify_all();
            }
            let (lock, cv) = &*ib;
            lock.lock().unwrap().closed = true;
            cv.notify_all();
        });
        let stderr = collect(stderr_pipe);
        Serve {
            stdin: child.stdin.take(),
            child,
            inbox,
            next: 1,
            stderr,
        }
    }

    /// Sends a request and returns its id.
    pub fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next;
        self.next += 1;
        let line = json!({"id": id, "method": method, "params": params}).to_string();
        self.raw(&line);
        id
    }

    pub fn raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Waits for the response to `id`.
    pub fn response(&self, id: u64, timeout: Duration) -> Value {
        let (lock, cv) = &*self.inbox;
        let deadline = Instant::now() + timeout;
        let mut inbox = lock.lock().unwrap();
        loop {
            if let Some(v) = inbox.responses.remove(&id) {
                return v;
            }
            let now = Instant::now();
            assert!(
                now < deadline && !inbox.closed,
                "no response to request {id}; stderr: {}",
                String::from_utf8_lossy(&self.stderr.lock().unwrap())
            );
            inbox = cv.wait_timeout(inbox, deadline - now).unwrap().0;
        }
    }

    /// Sends a `thread` call and returns its `result` (panics on an error response).
    pub fn thread(&mut self, params: Value) -> Value {
        let id = self.send("thread", params.clone());
        let r = self.response(id, Duration::from_secs(60));
        assert!(r.get("error").is_none(), "thread {params} failed: {r}");
        r["result"].clone()
    }

    /// The snapshots of the live threads as `list state=live` shows them, in list order.
    pub fn live_threads(&mut self) -> Vec<Value> {
        let r = self.thread(json!({"action": "list", "state": "live"}));
        r["details"]["threads"].as_array().unwrap().clone()
    }

    /// Lists (which asks no child anything) until this serve's only thread is closed, within
    /// `timeout`; returns its list snapshot.
    pub fn only_thread_once_closed(&mut self, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.thread(json!({"action": "list", "state": "all"}));
            let threads = r["details"]["threads"].as_array().unwrap().clone();
            assert_eq!(threads.len(), 1, "{r}");
            if threads[0]["status"] == "closed" {
                return threads[0].clone();
            }
            assert!(Instant::now() < deadline, "the thread never closed: {r}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends a `thread` call that must fail; returns the error object.
    pub fn thread_error(&mut self, params: Value) -> Value {
        let id = self.send("thread", params.clone());
        let r = self.response(id, Duration::from_secs(60));
        assert!(
            r.get("result").is_none(),
            "thread {params} should have failed: {r}"
        );
        r["error"].clone()
    }

    /// A `thread` `wait` on `id` that must come back after its first refresh with the thread
    /// idle and `timedOut: false` (one progress notification: it did not loop waiting for
    /// the child to settle). Returns the result.
    pub fn wait_idle_at_once(&mut self, id: &str, timeout_ms: u64) -> Value {
        let req = self.send(
            "thread",
            json!({"action": "wait", "id": id, "timeoutMs": timeout_ms}),
        );
        let r = self.response(req, Duration::from_millis(timeout_ms + 10_000));
        assert!(r.get("error").is_none(), "{r}");
        let d = &r["result"]["details"];
        assert_eq!(
            (d["timedOut"].as_bool(), d["snapshot"]["phase"].as_str()),
            (Some(false), Some("idle")),
            "wait on {id}: {r}"
        );
        let refreshes = self
            .notifications()
            .iter()
            .filter(|n| n["method"] == "progress" && n["params"]["requestId"] == req)
            .count();
        assert_eq!(
            refreshes, 1,
            "wait on {id}: its first refresh reads idle: {r}"
        );
        r["result"].clone()
    }

    /// Checks the result `r` of a launch without a prompt (`resume`, `fork`) of `id`: `idle`,
    /// since the child answered the launch's `get_state`. On a machine so loaded that Pi took
    /// longer than the launch's 4 s to answer, it is `starting` with a note saying so; then
    /// this says so on stderr and waits for the thread, so the checks that follow still run.
    pub fn expect_launched_idle(&mut self, r: &Value, id: &str) {
        let snap = &r["details"]["snapshot"];
        if snap["phase"] == "idle" {
            return;
        }
        let text = r["content"][0]["text"].as_str().unwrap_or("");
        assert!(
            snap["phase"] == "starting" && text.contains("has not answered within"),
            "a launch without a prompt is idle once the child answered: {r}"
        );
        eprintln!("note: {id} was still starting after its launch (a loaded machine): {text}");
        let w = self.thread(json!({"action": "wait", "id": id, "timeoutMs": 60_000}));
        assert_eq!(w["details"]["snapshot"]["phase"], "idle", "{w}");
    }

    /// How many response lines carried `id` so far.
    pub fn answer_count(&self, id: u64) -> u32 {
        let inbox = self.inbox.0.lock().unwrap();
        inbox.answers.get(&id).copied().unwrap_or(0)
    }

    pub fn notifications(&self) -> Vec<Value> {
        self.inbox.0.lock().unwrap().notifications.clone()
    }

    /// The notifications so far whose method is `notice`.
    pub fn notices(&self) -> Vec<Value> {
        self.notifications()
            .into_iter()
            .filter(|n| n["method"] == "notice")
            .collect()
    }

    /// The details of the progress notifications so far for request `id`.
    pub fn progress_of(&self, id: u64) -> Vec<Value> {
        self.notifications()
            .into_iter()
            .filter(|n| n["method"] == "progress" && n["params"]["requestId"] == id)
            .map(|n| n["params"]["details"].clone())
            .collect()
    }

    /// Closes stdin and waits for the exit status.
    pub fn close(&mut self, timeout: Duration) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Its stderr is read to the end before it is looked at: the collecting thread
                // lets go of its handle at EOF (a loaded machine runs it late).
                let read_by = Instant::now() + Duration::from_secs(5);
                while Arc::strong_count(&self.stderr) > 1 && Instant::now() < read_by {
                    std::thread::sleep(Duration::from_millis(5));
                }
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "serve did not exit after stdin EOF"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
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

/// Everything `pipe` gives until its end, collected by a thread of its own (a child's stderr,
/// read so that the child never blocks on it).
pub fn collect(mut pipe: impl std::io::Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let collected = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&collected);
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    collected
}

/// Pids of live processes whose environment carries `VAR=value`.
pub fn processes_with_env(var: &str, value: &str) -> Vec<u32> {
    let needle = format!("{var}={value}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(true);
        if !zombie && environ.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

/// The texts of the user messages in a Pi session file, in file order.
pub fn session_user_texts(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "user")
        .map(|e| {
            let c = &e["message"]["content"];
            c.as_str().map(str::to_string).unwrap_or_else(|| {
                c.as_array()
                    .map(|parts| parts.iter().filter_map(|p| p["text"].as_str()).collect())
                    .unwrap_or_default()
            })
        })
        .collect()
}

/// A `serve` for session `session_id` whose children are real Pi (`pi_argv`) loading the
/// threadbase extension with `tools` (`THREADBASE_TOOLS`), from the cleared environment `env`
/// plus what the extension and its own `serve` need; the database is `db`.
pub fn serve_with_pi_children(
    db: &Path,
    env: &[(String, String)],
    cwd: &Path,
    pi_argv: &[String],
    tools: &str,
    session_id: &str,
) -> Serve {
    let mut vars = env.to_vec();
    vars.push((
        "THREADBASE_PI_COMMAND".into(),
        serde_json::to_string(pi_argv).unwrap(),
    ));
    vars.push((
        "THREADBASE_BIN".into(),
        env!("CARGO_BIN_EXE_threadbase").into(),
    ));
    vars.push(("THREADBASE_DB".into(), db.display().to_string()));
    vars.push(("THREADBASE_TOOLS".into(), tools.into()));
    Serve::start(ServeSpec {
        db,
        args: vec![
            "--session-id".into(),
            session_id.into(),
            "--cwd".into(),
            cwd.display().to_string(),
        ],
        env: vars,
        cwd: cwd.to_path_buf(),
        clear_env: true,
    })
}

/// A worker's list status as `threadbase top` shows it (the original's terminal UI status;
/// `threads_list` itself returns only `{workers}`): its row's status and phase with its
/// view's report verdict and outcome.
pub fn top_status(db: &Path, list: &Value, worker: &str) -> String {
    let keys: Vec<&String> = list.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["workers"], "threads_list is {{workers}}: {list}");
    let view = list["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["workerID"] == worker)
        .unwrap_or_else(|| panic!("{worker} in {list}"));
    let conn = crate::support::sql::Conn::open(db).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    let sql = "SELECT status, phase FROM threads WHERE id = ?1";
    let (status, phase): (ThreadStatus, Phase) = conn
        .query_row(sql, [worker], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    threadbase::contract::worker::list_status(
        status,
        phase,
        view["report"]["verdict"].as_str(),
        view["outcome"].as_str().and_then(Outcome::parse),
    )
    .to_string()
}

/// Where a scripted-agent test runs its serves: a temporary directory (by its real path)
/// holding the database, the scripts (`<name>.json`) and any session files, and a marker that
/// every process the test starts carries in its environment, so that `leftovers` finds them.
pub struct Scripted {
    _dir: tempfile::TempDir,
    /// The directory's real path; serves run here (`--cwd`).
    pub root: PathBuf,
    pub db: PathBuf,
    pub marker: String,
    /// The PostgreSQL schema `db` names, on a PostgreSQL run.
    #[allow(dead_code)]
    pub schema: Option<super::postgres::TestSchema>,
}

impl Scripted {
    /// An empty place; `name` starts the marker.
    pub fn new(name: &str) -> Scripted {
        let dir = tempfile::tempdir().unwrap();
        let root = dunce::canonicalize(dir.path()).unwrap();
        let schema = super::postgres::schema_for_run(name);
        Scripted {
            db: match &schema {
                Some(s) => PathBuf::from(s.database_url()),
                None => root.join("db.sqlite"),
            },
            schema,
            marker: format!(
                "{name}-{}-{}",
                std::process::id(),
                threadbase::ids::random_hex(8)
            ),
            root,
            _dir: dir,
        }
    }

    /// Writes the script `<name>.json` (see `threadbase scripted-agent`).
    pub fn script(&self, name: &str, script: &str) {
        std::fs::write(self.root.join(format!("{name}.json")), script).unwrap();
    }

    /// Writes a session file at `relative` (its folders made), one entry a line.
    pub fn session_file(&self, relative: &str, entries: &[Value]) -> PathBuf {
        let file = self.root.join(relative);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let text: String = entries.iter().map(|e| format!("{e}\n")).collect();
        std::fs::write(&file, text).unwrap();
        file
    }

    /// A serve on this database whose children run `<script>.json`: `--cwd <root>`, then
    /// `args`; in its environment the scripted command, the marker, an agent folder of
    /// its own (`<root>/agent`), then `env`.
    pub fn serve(&self, script: &str, args: Vec<String>, env: &[(&str, &str)]) -> Serve {
        self.serve_under(&[], script, args, env)
    }

    /// [`Scripted::serve`] run by `prefix` ([`Serve::start_under`]).
    pub fn serve_under(
        &self,
        prefix: &[&str],
        script: &str,
        args: Vec<String>,
        env: &[(&str, &str)],
    ) -> Serve {
        let mut all_env = vec![
            (
                "THREADBASE_PI_COMMAND".to_string(),
                scripted_command(&self.root.join(format!("{script}.json"))),
            ),
            ("THREADBASE_TEST_MARKER".to_string(), self.marker.clone()),
            (
                "PI_CODING_AGENT_DIR".to_string(),
                self.root.join("agent").display().to_string(),
            ),
        ];
        all_env.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let mut all_args = vec!["--cwd".to_string(), self.root.display().to_string()];
        all_args.extend(args);
        Serve::start_under(
            prefix,
            ServeSpec {
                db: &self.db,
                args: all_args,
                env: all_env,
                cwd: self.root.clone(),
                clear_env: false,
            },
        )
    }

    /// The processes still alive that this place started.
    pub fn leftovers(&self) -> Vec<u32> {
        processes_with_env("THREADBASE_TEST_MARKER", &self.marker)
    }
}
