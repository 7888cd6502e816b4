//! The Pi extension's tools driven from Rust: `extension_driver.mjs` (beside this file) in the
//! Node of `tools/pi` loads `pi-extension/index.ts` as Pi does and runs its tools' `execute()`
//! against a real `threadbase serve`. Shared by tests/it/extension.rs and benches/serve.rs, so
//! it uses nothing of the test support but `serde_json`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

/// `tools/pi`, where `.ci/install-pi` puts Pi and its Node 22.
pub fn tools_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/pi")
}

/// The Node of `tools/pi`, or why there is none.
pub fn node() -> Result<PathBuf, String> {
    let tools = tools_dir();
    let node = tools.join("node_modules/node/bin/node");
    let jiti = tools.join("node_modules/jiti/package.json");
    if node.is_file() && jiti.is_file() {
        Ok(node)
    } else {
        Err(format!(
            "Node 22 and Pi's loader are not installed ({} missing); run .ci/install-pi",
            if node.is_file() { jiti } else { node }.display()
        ))
    }
}

/// One driver process: one extension instance at a time.
pub struct Driver {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Driver {
    /// Starts the driver for the extension file `extension` (normally `pi-extension/index.ts`)
    /// with `env` added to an environment that has none of `remove`.
    pub fn start(
        node: &Path,
        extension: &Path,
        cwd: &Path,
        env: &[(&str, String)],
        remove: &[&str],
    ) -> Driver {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/support/extension_driver.mjs");
        let mut cmd = Command::new(node);
        cmd.arg(script)
            .arg(tools_dir())
            .arg(extension)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for k in remove {
            cmd.env_remove(k);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start the extension driver (node)");
        Driver {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
        }
    }

    /// One request; its answer (a driver failure panics with its message).
    pub fn ask(&mut self, request: Value) -> Value {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the extension driver exited");
        let answer: Value = serde_json::from_str(&line).expect("a JSON answer");
        if let Some(fatal) = answer.get("fatal") {
            panic!("extension driver: {}", fatal.as_str().unwrap_or_default());
        }
        answer
    }

    /// A fresh extension instance for this session (`file` may be absent).
    pub fn load(&mut self, session: Value) -> Value {
        self.ask(json!({"op": "load", "session": session}))
    }

    /// One `execute()` of `tool`: `{result, aliased}` or `{error, code}`.
    pub fn call(&mut self, tool: &str, params: Value) -> Value {
        self.ask(json!({"op": "call", "tool": tool, "params": params}))
    }

    /// `count` timed calls, cycling through `params`; each call's time in ns.
    #[allow(dead_code)] // benches/serve.rs's `extension/*` rows
    pub fn time(&mut self, tool: &str, params: &[Value], count: usize) -> Vec<u64> {
        let a = self.ask(json!({"op": "time", "tool": tool, "params": params, "count": count}));
        ns(&a)
    }

    /// `count` first calls, each of a fresh instance (it starts serve); each call's time in ns.
    #[allow(dead_code)] // benches/serve.rs's `extension/first_call` row
    pub fn first_calls(&mut self, session: Value, params: Value, count: usize) -> Vec<u64> {
        let a = self.ask(json!({"op": "first", "tool": "thread", "params": params,
                                "count": count, "session": session}));
        ns(&a)
    }

    /// Shuts the instance down (its serve stops) and waits for the driver to exit.
    pub fn close(mut self) {
        self.ask(json!({"op": "shutdown"}));
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}

#[allow(dead_code)] // for `time` and `first_calls`
fn ns(answer: &Value) -> Vec<u64> {
    answer["ns"]
        .as_array()
        .expect("timings")
        .iter()
        .map(|v| v.as_u64().expect("ns"))
        .collect()
}

impl Drop for Driver {
    fn drop(&mut self) {
        if self.stdin.take().is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
