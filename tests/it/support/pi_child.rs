//! A real Pi in RPC mode over stdio, for tests: spawned from a hermetic [`PiEnv`] in its own
//! process group, stdout read as JSON records on a thread, stderr collected. Dropping it
//! SIGKILLs the whole group. Include it next to `fake_llm`:
//!
//! ```ignore
//! #[path = "support/fake_llm.rs"]
//! mod fake_llm;
//! #[path = "support/pi_child.rs"]
//! mod pi_child;
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ExitStatus};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::fake_llm::PiEnv;

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
        let mut stderr_pipe = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = stderr_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
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
