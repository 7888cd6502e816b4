//! A real Pi in RPC mode over stdio, for tests: spawned from a hermetic [`PiEnv`] in its own
//! process group, stdout read as JSON records on a thread, stderr collected. Dropping it
//! SIGKILLs the whole group. Also what the tests of a parent Pi running
//! `pi-extension/` share: [`spawn_parent`], runs ([`PiChild::run`]), the extension's dialogs
//! ([`PiChild::ui_request`], [`PiChild::answer_ui`]) and a clean exit ([`PiChild::finish`]).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ExitStatus};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::fake_llm::{hermetic_pi_env, pi_or_skip, FakeLlm, PiEnv, Step};

/// Longest record shown per line in [`PiChild::dump`].
const DUMP_RECORD_CHARS: usize = 2_000;

pub struct PiChild {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Every stdout record received so far.
    pub seen: Vec<Value>,
}

impl PiChild {
    /// Starts `pi` + the env's flags + `extra`, with `vars` added to the env's environment.
    pub fn spawn(pi: &[String], env: &PiEnv, extra: &[&str], vars: &[(&str, String)]) -> PiChild {
        let mut cmd = env.command(pi, extra);
        cmd.envs(vars.iter().map(|(k, v)| (k, v)));
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {:?}: {e}", env.argv(pi, extra)));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let stderr_pipe = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = super::serve_client::collect(stderr_pipe);
        PiChild {
            child,
            stdin,
            lines,
            stderr,
            seen: Vec::new(),
        }
    }

    pub fn pgid(&self) -> rustix::process::Pid {
        rustix::process::Pid::from_child(&self.child)
    }

    /// Writes one command line.
    pub fn send(&mut self, cmd: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{cmd}").expect("write to pi stdin");
        stdin.flush().expect("flush pi stdin");
    }

    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Diagnostics for a failed assertion: stdout records so far and stderr.
    pub fn dump(&self) -> String {
        let records: Vec<String> = self
            .seen
            .iter()
            .map(|v| v.to_string().chars().take(DUMP_RECORD_CHARS).collect())
            .collect();
        format!(
            "--- pi stdout records ---\n{}\n--- pi stderr ---\n{}",
            records.join("\n"),
            self.stderr_text()
        )
    }

    /// Reads stdout records until one satisfies `pred` (returned), or panics after `timeout`.
    pub fn wait_for(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                        panic!("stdout line is not JSON ({e}): {line:?}\n{}", self.dump())
                    });
                    self.seen.push(value.clone());
                    if pred(&value) {
                        return value;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("timed out waiting for {what}\n{}", self.dump())
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("pi closed stdout while waiting for {what}\n{}", self.dump())
                }
            }
        }
    }

    /// The first record at or after index `from` of everything seen that satisfies `pred`,
    /// reading more stdout as needed.
    pub fn wait_for_since(
        &mut self,
        what: &str,
        from: usize,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        if let Some(v) = self.seen[from.min(self.seen.len())..]
            .iter()
            .find(|v| pred(v))
        {
            return v.clone();
        }
        self.wait_for(what, timeout, pred)
    }

    /// The response to command `id`, whether it already arrived or is still to come.
    pub fn response(&mut self, id: &str, timeout: Duration) -> Value {
        let is_it = |v: &Value| v["type"] == "response" && v["id"] == id;
        self.wait_for_since(&format!("the response to {id}"), 0, timeout, is_it)
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends the prompt `message` as command `id` and reads records until `agent_settled`
    /// (each within `timeout`); returns the records of this run.
    pub fn run(&mut self, id: &str, message: &str, timeout: Duration) -> Vec<Value> {
        let mark = self.seen.len();
        self.send(&json!({"id": id, "type": "prompt", "message": message}));
        let response = self.wait_for("the prompt response", timeout, |v| {
            v["type"] == "response" && v["id"] == id
        });
        assert_eq!(response["success"], true, "{}", self.dump());
        self.wait_for("agent_settled", timeout, |v| v["type"] == "agent_settled");
        self.seen[mark..].to_vec()
    }

    /// The next dialog or notification of the extension with this `method`.
    pub fn ui_request(&mut self, method: &str, timeout: Duration) -> Value {
        self.wait_for(&format!("an extension_ui_request {method}"), timeout, |v| {
            v["type"] == "extension_ui_request" && v["method"] == method
        })
    }

    /// Answers the dialog `request` with the fields of `answer`.
    pub fn answer_ui(&mut self, request: &Value, answer: Value) {
        let mut response = json!({"type": "extension_ui_response", "id": request["id"]});
        response
            .as_object_mut()
            .unwrap()
            .extend(answer.as_object().unwrap().clone());
        self.send(&response);
    }

    /// Closes stdin and expects Pi to exit 0 within `timeout`.
    pub fn finish(&mut self, timeout: Duration) {
        drop(self.stdin.take());
        let status = self.wait_exit(timeout);
        let dump = self.dump();
        let status = status.unwrap_or_else(|| panic!("pi did not exit on stdin EOF\n{dump}"));
        assert!(status.success(), "pi exit {status:?}\n{dump}");
    }

    pub fn kill_group(&self) {
        // ESRCH once the group is empty: nothing to do.
        let _ = rustix::process::kill_process_group(self.pgid(), rustix::process::Signal::KILL);
    }
}

impl Drop for PiChild {
    fn drop(&mut self) {
        self.kill_group();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a real Pi run recorded: `threadbase --db DB sql --json QUERY`, parsed.
pub fn sql(db: &Path, query: &str) -> Vec<Value> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(db)
        .args(["sql", "--json", query])
        .output()
        .expect("run threadbase sql");
    assert!(
        out.status.success(),
        "threadbase sql {query:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    match serde_json::from_slice(&out.stdout).expect("sql --json prints JSON") {
        Value::Array(rows) => rows,
        other => panic!("sql --json printed {other}"),
    }
}

/// The extension's folder, `pi-extension/` (`-e` takes it or its `index.ts`).
pub fn extension_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("pi-extension")
}

/// A parent Pi on the session file `<root>/sessions/parent.jsonl` of `env`, loading
/// `extension` (`-e`); the extension's serve uses the database `db` and launches children with
/// `child_command` (`THREADBASE_PI_COMMAND`, a JSON argv); `more_vars` add to (or override)
/// those.
pub fn spawn_parent(
    pi: &[String],
    env: &PiEnv,
    extension: &Path,
    db: &Path,
    child_command: String,
    more_vars: &[(&str, String)],
) -> PiChild {
    let session = parent_session(env);
    let mut vars = vec![
        (
            "THREADBASE_BIN",
            env!("CARGO_BIN_EXE_threadbase").to_string(),
        ),
        ("THREADBASE_DB", db.display().to_string()),
        ("THREADBASE_PI_COMMAND", child_command),
    ];
    vars.extend(more_vars.iter().cloned());
    let (session_arg, ext_arg) = (
        session.display().to_string(),
        extension.display().to_string(),
    );
    PiChild::spawn(pi, env, &["--session", &session_arg, "-e", &ext_arg], &vars)
}

/// The session file of [`spawn_parent`]'s Pi.
pub fn parent_session(env: &PiEnv) -> PathBuf {
    env.root.path().join("sessions").join("parent.jsonl")
}

/// The argv (JSON) of a scripted child whose one turn stays busy for `ms` (a stop ends it),
/// its script written in `env`'s root.
pub fn busy_child_command(env: &PiEnv, ms: u64) -> String {
    let script = env.root.path().join("child-script.json");
    std::fs::write(
        &script,
        json!({"turns": [{"steps": [{"delay_ms": ms}, {"text": "x"}]}]}).to_string(),
    )
    .unwrap();
    super::serve_client::scripted_command(&script)
}

/// The `tool_execution_end` records of `tool` among `events`.
pub fn tool_ends<'a>(events: &'a [Value], tool: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end" && e["toolName"] == tool)
        .collect()
}

/// The strings of the JSON array `v`.
pub fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The row of the thread at `path`: the `columns` of `threads` (a comma-separated list).
pub fn thread_row(db: &Path, columns: &str, path: &str) -> Value {
    let rows = sql(
        db,
        &format!("SELECT {columns} FROM threads WHERE path = '{path}'"),
    );
    assert_eq!(rows.len(), 1, "{path}: {rows:#?}");
    rows[0].clone()
}

/// Real Pi (`None`: skip `test`), a fake LLM playing `steps` in order, and a hermetic
/// environment for it.
pub fn pi_with_steps(
    test: &str,
    steps: impl IntoIterator<Item = Step>,
) -> Option<(Vec<String>, FakeLlm, PiEnv)> {
    let pi = pi_or_skip(test)?;
    let fake = FakeLlm::with_script(steps);
    let env = hermetic_pi_env(&fake);
    Some((pi, fake, env))
}

/// [`spawn_parent`] with `pi-extension/index.ts` and the database `<root>/db.sqlite`, whose
/// threads are scripted children that stay busy for `busy_ms`; with the database and that
/// child command.
pub fn parent_with_busy_children(
    pi: &[String],
    env: &PiEnv,
    busy_ms: u64,
) -> (PiChild, PathBuf, String) {
    let db = env.root.path().join("db.sqlite");
    let child_command = busy_child_command(env, busy_ms);
    let extension = extension_dir().join("index.ts");
    let parent = spawn_parent(pi, env, &extension, &db, child_command.clone(), &[]);
    (parent, db, child_command)
}

/// What a parent model asks its child in the extension's tests, and the child model's answer.
pub const CHILD_PROMPT: &str = "Say the magic word.";
pub const CHILD_ANSWER: &str = "The magic word is xyzzy.";

/// A fake LLM whose parent model starts `magic` with [`CHILD_PROMPT`] and waits for it, then
/// plays `then`. The child's request is routed by its prompt (it gets [`CHILD_ANSWER`]), so it
/// is answered correctly whenever it arrives (it races the parent's request after `start`).
pub fn magic_word_fake(then: impl IntoIterator<Item = Step>) -> FakeLlm {
    let start = json!({"action": "start", "prompt": CHILD_PROMPT, "taskName": "magic"});
    let wait = json!({"action": "wait", "id": "magic", "timeoutMs": 60000});
    let steps = [
        Step::tool_call("thread", start),
        Step::tool_call("thread", wait),
    ];
    let fake = FakeLlm::with_script(steps.into_iter().chain(then));
    fake.route(
        |r| r.last_user_text().as_deref() == Some(CHILD_PROMPT),
        Step::text(CHILD_ANSWER),
    );
    fake
}

/// [`pi_or_skip`] for a test that starts a parent Pi with the extension, holding
/// [`one_parent_at_a_time`].
pub fn parent_pi_or_skip(test: &str) -> Option<(Vec<String>, MutexGuard<'static, ()>)> {
    let pi = pi_or_skip(test)?;
    Some((pi, one_parent_at_a_time()))
}

static PARENTS: Mutex<()> = Mutex::new(());

/// Held by a test that starts a parent Pi with the extension (several Node processes at
/// once): such tests run one at a time. A child Pi that takes longer than the engine's 4 s
/// prompt-answer wait to start exposes a runtime race (a stale `get_state` answer can end a
/// `wait` before the child answered).
pub fn one_parent_at_a_time() -> MutexGuard<'static, ()> {
    PARENTS.lock().unwrap_or_else(|p| p.into_inner())
}
