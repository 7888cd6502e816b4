//! Contract C (worker tools, `threads_*`) through real `threadbase serve` processes whose
//! workers are `threadbase scripted-agent` processes. A file for each method whose behaviour its
//! tests assert, named without the `threads_` prefix (`spawn`, `send`, `report`), and `tour` for
//! the tests that cross the methods; the world and the helpers they share are here.

mod report;
mod send;
mod spawn;
mod tour;

use crate::support::serve_client;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_client::{Scripted, Serve};

const COORD: &str = "ses_coord";

/// `ses_` + digest(["ses_coord", "review"])[..32] (reference/contract-semantics.md §3.2).
const REVIEW_WORKER: &str = "ses_b47bb7c83655aa899fd1b7f2b4899c1f";

/// That worker's send key `k1`.
const K1_MESSAGE: &str = "msg_f3793a38a282b806d2a764e3603af485";

const QUICK: &str = r#"{"turns": [], "default_reply": "done: {prompt}"}"#;

struct World {
    base: Scripted,
    parent_session: PathBuf,
}

fn world(script: &str) -> World {
    let base = Scripted::new("serve-worker");
    let header = json!({"type":"session","version":3,"id":COORD,"timestamp":"2026-11-30T00:00:00.000Z","cwd":base.root});
    let parent_session = base.session_file("sessions/parent.jsonl", &[header]);
    base.script("script", script);
    std::fs::create_dir_all(base.root.join("work")).unwrap();
    World {
        base,
        parent_session,
    }
}

impl World {
    /// A serve whose caller (and coordinator identity) is `session_id`.
    fn serve(&self, session_id: &str, extra_env: &[(&str, &str)]) -> Serve {
        self.serve_with(session_id, extra_env, &[])
    }

    /// [`World::serve`] with more serve arguments (e.g. the coordinator's `--parent-args`).
    fn serve_with(&self, session_id: &str, extra_env: &[(&str, &str)], more: &[&str]) -> Serve {
        let mut args = vec![
            "--session-file".into(),
            self.parent_session.display().to_string(),
            "--session-id".into(),
            session_id.into(),
        ];
        args.extend(more.iter().map(|a| a.to_string()));
        self.base.serve("script", args, extra_env)
    }

    /// [`World::serve`] on host `host`, as pid 1 of a PID namespace of its own (issue 33's
    /// two-host tests).
    fn serve_in_pid_namespace(&self, session_id: &str, host: &str) -> Serve {
        self.base.serve_under(
            &["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"],
            "script",
            vec![
                "--session-file".into(),
                self.parent_session.display().to_string(),
                "--session-id".into(),
                session_id.into(),
            ],
            &[("THREADBASE_HOST_ID", host)],
        )
    }

    fn work(&self) -> String {
        self.base.root.join("work").display().to_string()
    }

    fn conn(&self) -> crate::support::sql::Conn {
        let c = crate::support::sql::Conn::open(&self.base.db).unwrap();
        c.busy_timeout(Duration::from_secs(10)).unwrap();
        c
    }

    fn count(&self, sql: &str) -> i64 {
        self.conn().query_row(sql, (), |r| r.get(0)).unwrap()
    }

    fn session_file(&self, worker: &str) -> PathBuf {
        let f: String = self
            .conn()
            .query_row(
                "SELECT session_file FROM threads WHERE id = ?1",
                [worker],
                |r| r.get(0),
            )
            .unwrap();
        PathBuf::from(f)
    }

    /// The user messages the worker's session file holds.
    fn user_messages(&self, worker: &str) -> Vec<String> {
        let text = std::fs::read_to_string(self.session_file(worker)).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["type"] == "message" && v["message"]["role"] == "user")
            .map(|v| {
                let c = &v["message"]["content"];
                c.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| c[0]["text"].as_str().unwrap_or_default().to_string())
            })
            .collect()
    }

    /// This world's live processes of one worker.
    fn worker_processes(&self, worker: &str) -> Vec<u32> {
        let needle = format!("THREADBASE_WORKER_ID={worker}");
        self.base
            .leftovers()
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ"))
                    .map(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
                    .unwrap_or(false)
            })
            .collect()
    }
}

/// The result of a call (panics on an error response).
fn call(s: &mut Serve, method: &str, params: Value) -> Value {
    let id = s.send(method, params.clone());
    let r = s.response(id, Duration::from_secs(60));
    assert!(r.get("error").is_none(), "{method} {params} failed: {r}");
    r["result"].clone()
}

/// The `details` of a tool call, after checking that the text content is the same JSON.
fn tool(s: &mut Serve, method: &str, params: Value) -> Value {
    let r = call(s, method, params);
    let text = r["content"][0]["text"].as_str().expect("text content");
    assert_eq!(r["content"][0]["type"], "text");
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), r["details"]);
    r["details"].clone()
}

/// The error of a call that must fail.
fn error(s: &mut Serve, method: &str, params: Value) -> Value {
    let id = s.send(method, params.clone());
    let r = s.response(id, Duration::from_secs(60));
    assert!(
        r.get("result").is_none(),
        "{method} {params} should have failed: {r}"
    );
    r["error"].clone()
}

fn message(e: &Value) -> &str {
    e["message"].as_str().unwrap()
}

fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Polls threads_list until the worker's view satisfies `f`; returns that view.
fn wait_view(s: &mut Serve, worker: &str, f: impl Fn(&Value) -> bool) -> Value {
    let start = Instant::now();
    loop {
        let list = tool(s, "threads_list", json!({}));
        if let Some(v) = list["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["workerID"] == worker)
        {
            if f(v) {
                return v.clone();
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "worker {worker} never reached the state; last list {list}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn spawn_params(w: &World, key: &str, task: &str) -> Value {
    json!({"key": key, "title": format!("Title {key}"), "directory": w.work(), "task": task})
}
