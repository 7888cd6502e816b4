//! Contract B (`agent_*`) through real `threadbase serve` processes whose children are
//! `threadbase scripted-agent` processes. A child agent's own serve is a second serve started
//! with `--scope-path /root/a` and the root session id, exactly what the Pi extension starts
//! inside a child Pi.
//!
//! A file for each method whose behaviour its tests assert, named without the `agent_` prefix
//! (`spawn`, `spawn_types`, `status`, `wait`, `steer`, `stop`, `reap`), with 0.19's additions
//! (issue 29: the view's new fields, report-only timeouts, reap, per-type models, tools and
//! extensions, the final recap) beside the rest; `tour` for the tests that cross the methods
//! and `shutdown` for serve's. The world and the helpers they share (also `queue`'s and
//! `questions`') are here.

mod reap;
mod shutdown;
mod spawn;
mod spawn_types;
mod status;
mod steer;
mod stop;
mod tour;
mod wait;

use crate::support::serve_client;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_client::{Scripted, Serve};
use Says::{Any, Has, Starts};

pub(crate) const ROOT_SESSION: &str = "ses_main";

pub(crate) struct World {
    pub(crate) base: Scripted,
    pub(crate) root_session: PathBuf,
}

pub(crate) fn world() -> World {
    let base = Scripted::new("agent");
    let lines = [
        json!({"type":"session","version":3,"id":ROOT_SESSION,"timestamp":"2026-11-30T00:00:00.000Z","cwd":base.root}),
        json!({"type":"message","id":"m0000001","parentId":null,"timestamp":"2026-11-30T00:00:01.000Z","message":{"role":"system","content":"SYSTEM PROMPT","timestamp":1}}),
        json!({"type":"message","id":"m0000002","parentId":"m0000001","timestamp":"2026-11-30T00:00:02.000Z","message":{"role":"user","content":[{"type":"text","text":"the main question"}],"timestamp":2}}),
        json!({"type":"message","id":"m0000003","parentId":"m0000002","timestamp":"2026-11-30T00:00:03.000Z","message":{"role":"assistant","content":[{"type":"text","text":"the main answer"}],"stopReason":"stop","timestamp":3}}),
        json!({"type":"message","id":"m0000004","parentId":"m0000003","timestamp":"2026-11-30T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"broken"}],"stopReason":"error","errorMessage":"boom","timestamp":4}}),
    ];
    let root_session = base.session_file("sessions/main.jsonl", &lines);
    for (name, script) in [
        // Answers after a short pause.
        (
            "quick",
            json!({"turns": [{"steps": [{"delay_ms": 100}, {"text": "answer to {prompt}"}]}]}),
        ),
        // Works for a while (long enough to pause, steer or stop it), then answers.
        (
            "slow",
            json!({"turns": [{"steps": [{"delay_ms": 2500}, {"text": "slow answer to {prompt}"}]}]}),
        ),
        // The model fails.
        (
            "failing",
            json!({"turns": [{"steps": [{"delay_ms": 50}, {"error": "500: model exploded"}]}]}),
        ),
    ] {
        base.script(name, &script.to_string());
    }
    World { base, root_session }
}

impl World {
    /// The main conversation's serve.
    pub(crate) fn root(&self, script: &str, env: &[(&str, &str)]) -> Serve {
        self.serve(
            script,
            vec![
                "--session-file".into(),
                self.root_session.display().to_string(),
            ],
            env,
        )
    }

    pub(crate) fn root_with_args(
        &self,
        script: &str,
        env: &[(&str, &str)],
        parent_args: &str,
    ) -> Serve {
        self.serve(
            script,
            vec![
                "--session-file".into(),
                self.root_session.display().to_string(),
                "--parent-args".into(),
                parent_args.into(),
            ],
            env,
        )
    }

    /// The serve a child agent at `path` runs (its own session id, the root's registry).
    pub(crate) fn child(&self, path: &str, script: &str) -> Serve {
        let session_id = format!("ses_child_{}", path.replace('/', "_"));
        self.serve(
            script,
            vec![
                "--session-id".into(),
                session_id,
                "--scope-path".into(),
                path.into(),
            ],
            &[("PI_THREADS_ROOT_SESSION_ID", ROOT_SESSION)],
        )
    }

    /// Waits up to `secs` for every process this world started to be gone.
    pub(crate) fn all_gone(&self, secs: u64) {
        wait_for("no leftovers", Duration::from_secs(secs), || {
            self.base.leftovers().is_empty()
        });
    }

    /// [`World::all_gone`], then `threadbase check` finds nothing wrong.
    pub(crate) fn finish(&self, secs: u64) {
        self.all_gone(secs);
        check_clean(&self.base.db);
    }

    pub(crate) fn serve(&self, script: &str, args: Vec<String>, extra: &[(&str, &str)]) -> Serve {
        self.base.serve(script, args, extra)
    }

    pub(crate) fn sql(&self, query: &str) -> Vec<Vec<Value>> {
        crate::support::sql::values(&self.base.db, query)
            .into_iter()
            .map(|r| r.into_iter().map(crate::support::sql::json).collect())
            .collect()
    }
}

/// A worker spawned at `path` with `task`, waited for (the default).
pub(crate) fn spawn(s: &mut Serve, path: &str, task: &str) -> Value {
    let params = json!({"path": path, "type": "worker", "task": task});
    call(s, "agent_spawn", params)
}

/// A worker spawned at `path` with `task`, not waited for.
pub(crate) fn spawn_detached(s: &mut Serve, path: &str, task: &str) -> Value {
    let params = json!({"path": path, "type": "worker", "task": task, "wait": false});
    call(s, "agent_spawn", params)
}

/// `threadbase check` passes on the database (no errors, no warnings).
pub(crate) fn check_clean(db: &Path) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(db)
        .args(["check", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(out.status.success(), "{report}");
    assert_eq!(report["problems"], json!([]), "{report}");
}

pub(crate) fn call(s: &mut Serve, method: &str, params: Value) -> Value {
    let id = s.send(method, params.clone());
    let r = s.response(id, Duration::from_secs(60));
    assert!(r.get("error").is_none(), "{method} {params} failed: {r}");
    r["result"]["details"].clone()
}

pub(crate) fn fail(s: &mut Serve, method: &str, params: Value) -> (String, String) {
    let id = s.send(method, params.clone());
    let r = s.response(id, Duration::from_secs(60));
    assert!(
        r.get("result").is_none(),
        "{method} {params} should fail: {r}"
    );
    let e = &r["error"];
    let message = e["message"].as_str().unwrap().to_string();
    assert!(message.contains("Repair:"), "no repair hint: {message}");
    (e["code"].as_str().unwrap().to_string(), message)
}

/// What a refusal's message must say (besides the `Repair:` hint `fail` always asks for).
#[derive(Clone, Copy)]
enum Says<'a> {
    Has(&'a str),
    Starts(&'a str),
    Any,
}

/// `method` with `params` fails with `code` (`None`: any code) and a message that `says`; a
/// failed assertion names the call.
fn refused(s: &mut Serve, method: &str, params: Value, code: Option<&str>, says: Says) {
    let (got, m) = fail(s, method, params.clone());
    if let Some(code) = code {
        assert_eq!(got, code, "{method} {params}: {m}");
    }
    match says {
        Has(needle) => assert!(m.contains(needle), "{method} {params}: {m}"),
        Starts(start) => assert!(m.starts_with(start), "{method} {params}: {m}"),
        Any => {}
    }
}

/// Each case, in order, as `refused`.
fn refused_all(s: &mut Serve, cases: Vec<(&str, Value, Option<&str>, Says)>) {
    for (method, params, code, says) in cases {
        refused(s, method, params, code, says);
    }
}

pub(crate) fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn notices(s: &Serve) -> Vec<Value> {
    s.notifications()
        .into_iter()
        .filter(|n| n["method"] == "notice")
        .map(|n| n["params"].clone())
        .collect()
}

pub(crate) fn session_lines(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A child that says two things (each with a tool call), then works for a while and answers.
fn talker(w: &World) {
    w.base.script(
        "talker",
        &json!({"turns": [{"steps": [
            {"text": "looking at A"}, {"tool": "bash", "args": {"command": "ls"}, "result": "a"},
            {"text": "looking at B"}, {"tool": "bash", "args": {"command": "ls"}, "result": "b"},
            {"delay_ms": 2500}, {"text": "final answer"}
        ]}]})
        .to_string(),
    );
}

/// Writes the global settings file of the world's serves (`<root>/agent/threadbase-agents.json`).
fn settings(w: &World, doc: &Value) {
    let dir = w.base.root.join("agent");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("threadbase-agents.json"), doc.to_string()).unwrap();
}
