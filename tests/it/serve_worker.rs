//! Contract C (worker tools) through real `threadbase serve` processes whose workers are
//! `threadbase scripted-agent` processes: derived ids, idempotent spawn and send, the slot
//! limit, interrupt/hide/restore/snapshot, roles, report dedupe across processes, and the
//! validation of directories, granted paths and agent profiles.

use crate::support::{common, serve_client};

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_client::{top_status, Scripted, Serve};

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

    fn work(&self) -> String {
        self.base.root.join("work").display().to_string()
    }

    fn conn(&self) -> rusqlite::Connection {
        let c = rusqlite::Connection::open(&self.base.db).unwrap();
        c.busy_timeout(Duration::from_secs(10)).unwrap();
        c
    }

    fn count(&self, sql: &str) -> i64 {
        self.conn().query_row(sql, [], |r| r.get(0)).unwrap()
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

#[test]
fn spawn_is_idempotent_and_delivers_the_initial_prompt_once() {
    let w = world(QUICK);
    let mut s = w.serve(COORD, &[]);
    let params = json!({"key": "review", "title": "Review", "directory": w.work(), "task": "Check the docs"});
    let v = tool(&mut s, "threads_spawn", params.clone());
    assert_eq!(common::keys(&v), common::WORKER_VIEW_KEYS);
    assert_eq!(v["workerID"], REVIEW_WORKER, "the derived id");
    assert_eq!(v["coordinatorID"], COORD);
    assert_eq!(v["key"], "review");
    assert_eq!(v["title"], "Review");
    assert_eq!(v["directory"], w.work());
    assert_eq!(v["agent"], Value::Null);
    assert_eq!(v["report"], Value::Null);
    assert_eq!(v["hidden"], false);
    let v = wait_view(&mut s, REVIEW_WORKER, |v| v["outcome"] == "succeeded");
    assert_eq!(v["hidden"], false);
    // No --model in its args: the model is learnt from the session after the first run.
    assert_eq!(
        v["model"],
        json!({"providerID": "scripted", "id": "scripted-model"})
    );

    // The worker runs as a top-level session in its directory, with its id in the header.
    let file = w.session_file(REVIEW_WORKER);
    assert_eq!(file.parent().unwrap(), w.parent_session.parent().unwrap());
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["id"], REVIEW_WORKER);
    assert_eq!(header["cwd"], w.work());
    assert!(header.get("parentSession").is_none());
    let users = w.user_messages(REVIEW_WORKER);
    assert_eq!(users.len(), 1, "{users:?}");
    // The prompt is opzero1/threads' text exactly: the task, then the worker instructions,
    // ending at "…does not establish task success." with nothing after it.
    assert_eq!(
        users[0],
        format!(
            "Check the docs\n\nYou are a managed worker assigned to {}. Work only within the assigned scope. You may use native subagent for bounded tasks or reviews when useful, within the brief's delegation limits and your permissions. Delegation is optional. Pass relevant context, scope, and constraints to each subagent. Do not call threads_spawn. Review your subagents' results and resolve any outstanding work before reporting. Only you call threads_report with the combined verdict, summary, and evidence; subagents return results to you. Runtime completion alone does not establish task success.",
            w.work()
        )
    );
    let pids = w.worker_processes(REVIEW_WORKER);
    assert_eq!(pids.len(), 1, "one worker process");
    let environ = std::fs::read(format!("/proc/{}/environ", pids[0])).unwrap();
    let environ: Vec<String> = environ
        .split(|b| *b == 0)
        .map(|kv| String::from_utf8_lossy(kv).into_owned())
        .collect();
    assert!(environ.contains(&format!("THREADBASE_COORDINATOR_ID={COORD}")));
    assert!(environ.contains(&"PI_THREADS_PATH=/root".to_string()));
    assert!(environ.contains(&"PI_THREADS_SELF_ID=".to_string()));

    // Identical retries, sequential and concurrent: the same worker, the prompt once.
    let again = tool(&mut s, "threads_spawn", params.clone());
    assert_eq!(again["workerID"], REVIEW_WORKER);
    assert_eq!(again["outcome"], "succeeded");
    let ids: Vec<u64> = (0..4)
        .map(|_| s.send("threads_spawn", params.clone()))
        .collect();
    for id in ids {
        let r = s.response(id, Duration::from_secs(30));
        assert_eq!(r["result"]["details"]["workerID"], REVIEW_WORKER, "{r}");
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(w.user_messages(REVIEW_WORKER).len(), 1, "Trap 8");
    assert_eq!(w.worker_processes(REVIEW_WORKER).len(), 1);
    let (state, message_id, initial): (String, String, String) = w
        .conn()
        .query_row(
            "SELECT mb.state, mb.message_id, t.initial_message_id FROM mailbox mb JOIN threads t ON t.id = mb.thread_id WHERE mb.direction = 'to_child'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(state, "delivered");
    assert_eq!(message_id, initial);
    assert!(initial.starts_with("msg_") && initial.len() == 36);

    // A changed request under the key is refused, and nothing is written.
    for changed in [
        json!({"key": "review", "title": "Review", "directory": w.work(), "task": "Other"}),
        json!({"key": "review", "title": "Other", "directory": w.work(), "task": "Check the docs"}),
        json!({"key": "review", "title": "Review", "directory": w.base.root.display().to_string(), "task": "Check the docs"}),
        json!({"key": "review", "title": "Review", "directory": w.work(), "task": "Check the docs", "paths": [w.base.root.display().to_string()]}),
    ] {
        let e = error(&mut s, "threads_spawn", changed);
        assert_eq!(e["code"], "conflict");
        assert!(message(&e).starts_with("This spawn key already belongs to a different request"));
    }
    // `paths: []` is the same request as no paths.
    let mut same = params.clone();
    same["paths"] = json!([]);
    assert_eq!(
        tool(&mut s, "threads_spawn", same)["workerID"],
        REVIEW_WORKER
    );

    // list: {workers}, hidden included; the status `top` shows for it.
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(list["workers"].as_array().unwrap().len(), 1);
    assert_eq!(top_status(&w.base.db, &list, REVIEW_WORKER), "no report");
    assert_eq!(
        w.count("SELECT count(*) FROM threads WHERE coordinator_id IS NOT NULL"),
        1
    );
    let e = error(&mut s, "threads_list", json!({"x": 1}));
    assert_eq!(e["code"], "invalid_params");
    let e = error(&mut s, "threads_nope", json!({}));
    assert!(message(&e).contains("threads_spawn, threads_list, threads_send"));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn a_retry_after_a_failed_launch_relaunches_and_delivers_what_is_pending() {
    let w = world(r#"{"startup_exit": 3, "startup_stderr": "boom"}"#);
    let mut s = w.serve(COORD, &[]);
    let params =
        json!({"key": "review", "title": "Review", "directory": w.work(), "task": "Try again"});
    tool(&mut s, "threads_spawn", params.clone());
    let v = wait_view(&mut s, REVIEW_WORKER, |v| v["outcome"] == "failed");
    assert_eq!(v["report"], Value::Null);
    assert_eq!(
        w.count("SELECT count(*) FROM mailbox WHERE state = 'pending'"),
        1,
        "the prompt was never accepted"
    );
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(top_status(&w.base.db, &list, REVIEW_WORKER), "failed");
    // The agent works now; the identical retry resumes the saved session and delivers once.
    std::fs::write(w.base.root.join("script.json"), QUICK).unwrap();
    let v = tool(&mut s, "threads_spawn", params.clone());
    assert_eq!(v["workerID"], REVIEW_WORKER);
    wait_until("the prompt to arrive", Duration::from_secs(10), || {
        w.user_messages(REVIEW_WORKER).len() == 1
    });
    wait_view(&mut s, REVIEW_WORKER, |v| v["outcome"] == "succeeded");
    assert_eq!(
        w.count("SELECT count(*) FROM mailbox WHERE state = 'pending'"),
        0
    );
    tool(&mut s, "threads_spawn", params.clone());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(w.user_messages(REVIEW_WORKER).len(), 1);
    s.close(Duration::from_secs(20));

    // After the coordinator's serve is gone (workers stopped), a new serve of the same session
    // relaunches the worker on the identical retry without re-sending the prompt.
    let mut s = w.serve(COORD, &[]);
    let v = tool(&mut s, "threads_spawn", params);
    assert_eq!(v["outcome"], "succeeded", "the last run's outcome stands");
    assert_eq!(w.worker_processes(REVIEW_WORKER).len(), 1);
    let r = tool(
        &mut s,
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "k1", "text": "one more"}),
    );
    assert_eq!(
        r,
        json!({"workerID": REVIEW_WORKER, "messageID": K1_MESSAGE})
    );
    wait_until("the send to arrive", Duration::from_secs(10), || {
        w.user_messages(REVIEW_WORKER).len() == 2
    });
    assert_eq!(w.user_messages(REVIEW_WORKER)[1], "one more");
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn keyed_sends_are_idempotent_and_owned() {
    let w = world(QUICK);
    let mut s = w.serve(COORD, &[]);
    tool(
        &mut s,
        "threads_spawn",
        json!({"key": "review", "title": "Review", "directory": w.work(), "task": "First"}),
    );
    wait_view(&mut s, REVIEW_WORKER, |v| v["outcome"] == "succeeded");
    let hidden = tool(&mut s, "threads_hide", json!({"workerID": REVIEW_WORKER}));
    assert_eq!(hidden["hidden"], true);

    let send = json!({"workerID": REVIEW_WORKER, "key": "k1", "text": "Second"});
    let r = tool(&mut s, "threads_send", send.clone());
    assert_eq!(
        r,
        json!({"workerID": REVIEW_WORKER, "messageID": K1_MESSAGE})
    );
    wait_until("the send", Duration::from_secs(10), || {
        w.user_messages(REVIEW_WORKER).len() == 2
    });
    let v = wait_view(&mut s, REVIEW_WORKER, |v| v["outcome"] == "succeeded");
    assert_eq!(v["hidden"], false, "a send removes the hidden override");
    // Same key, same text: a no-op retry with the same ids.
    let r = tool(&mut s, "threads_send", send.clone());
    assert_eq!(r["messageID"], K1_MESSAGE);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(w.user_messages(REVIEW_WORKER).len(), 2);
    // Same key, other text: refused.
    let e = error(
        &mut s,
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "k1", "text": "Different"}),
    );
    assert_eq!(e["code"], "conflict");
    assert!(message(&e).starts_with("This send key already belongs to different text"));
    // Concurrent sends under new keys: each delivered once, in order.
    let a = s.send(
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "k2", "text": "Third"}),
    );
    let b = s.send(
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "k2", "text": "Third"}),
    );
    for id in [a, b] {
        let r = s.response(id, Duration::from_secs(30));
        assert_eq!(
            r["result"]["details"]["messageID"],
            threadbase::contract::worker::send_message_id(&REVIEW_WORKER.into(), "k2")
        );
    }
    wait_until("the third message", Duration::from_secs(10), || {
        w.user_messages(REVIEW_WORKER).len() == 3
    });
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        w.user_messages(REVIEW_WORKER),
        [
            w.user_messages(REVIEW_WORKER)[0].clone(),
            "Second".to_string(),
            "Third".to_string()
        ]
    );
    // Keys are any characters and scoped to the worker.
    let odd = "a key: with / \\ and \"quotes\" and ünïcode";
    let r = tool(
        &mut s,
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": odd, "text": "Fourth"}),
    );
    assert_eq!(
        r["messageID"],
        threadbase::contract::worker::send_message_id(&REVIEW_WORKER.into(), odd)
    );

    // Ownership and unknown workers.
    let e = error(
        &mut s,
        "threads_send",
        json!({"workerID": "ses_00000000000000000000000000000000", "key": "k", "text": "x"}),
    );
    assert_eq!(e["code"], "unknown_reference");
    let mut other = w.serve("ses_other", &[]);
    for (method, params) in [
        ("threads_send", send.clone()),
        ("threads_interrupt", json!({"workerID": REVIEW_WORKER})),
        ("threads_hide", json!({"workerID": REVIEW_WORKER})),
    ] {
        let e = error(&mut other, method, params);
        assert_eq!(e["code"], "forbidden");
        assert!(message(&e).starts_with("Only the owning coordinator may control this worker"));
    }
    assert!(
        tool(&mut other, "threads_list", json!({}))["workers"]
            .as_array()
            .unwrap()
            .is_empty(),
        "a list shows the caller's own workers"
    );
    let e = error(
        &mut s,
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "", "text": "x"}),
    );
    assert_eq!(e["code"], "invalid_params");
    let e = error(
        &mut s,
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "k".repeat(201), "text": "x"}),
    );
    assert!(message(&e).contains("key must be at most 200 characters"));
    other.close(Duration::from_secs(20));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn slot_limit_counts_hidden_and_unreported_workers() {
    let w = world(QUICK);
    let mut s = w.serve(COORD, &[("THREADBASE_MAX_WORKERS", "2")]);
    let a = tool(&mut s, "threads_spawn", spawn_params(&w, "a", "A"));
    let a_id = a["workerID"].as_str().unwrap().to_string();
    wait_view(&mut s, &a_id, |v| v["outcome"] == "succeeded");
    tool(&mut s, "threads_hide", json!({"workerID": a_id}));
    let b = tool(&mut s, "threads_spawn", spawn_params(&w, "b", "B"));
    let b_id = b["workerID"].as_str().unwrap().to_string();
    wait_view(&mut s, &b_id, |v| v["outcome"] == "succeeded");
    let before = w.count("SELECT count(*) FROM threads");
    let e = error(&mut s, "threads_spawn", spawn_params(&w, "c", "C"));
    assert_eq!(e["code"], "limit");
    assert!(
        message(&e).starts_with("Coordinator worker limit reached (2)"),
        "{e}"
    );
    assert_eq!(w.count("SELECT count(*) FROM threads"), before);
    // An existing worker's identical retry is not limited.
    assert_eq!(
        tool(&mut s, "threads_spawn", spawn_params(&w, "a", "A"))["workerID"],
        a_id
    );
    // A report frees a slot.
    let mut ws = w.serve(&a_id, &[]);
    tool(
        &mut ws,
        "threads_report",
        json!({"verdict": "FAIL", "summary": "broken", "evidence": []}),
    );
    ws.close(Duration::from_secs(20));
    let c = tool(&mut s, "threads_spawn", spawn_params(&w, "c", "C"));
    assert_eq!(
        c["workerID"],
        threadbase::contract::worker::worker_identity(
            &threadbase::domain::SessionId::new(COORD),
            "c"
        )
        .as_str()
    );
    s.close(Duration::from_secs(20));

    // An invalid setting warns and falls back to 4.
    let mut s = w.serve("ses_second", &[("THREADBASE_MAX_WORKERS", "99")]);
    for k in ["a", "b", "c", "d"] {
        tool(&mut s, "threads_spawn", spawn_params(&w, k, k));
    }
    let e = error(&mut s, "threads_spawn", spawn_params(&w, "e", "e"));
    assert!(message(&e).starts_with("Coordinator worker limit reached (4)"));
    s.close(Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&s.stderr.lock().unwrap()).into_owned();
    assert!(
        stderr.contains(r#"Ignoring invalid THREADBASE_MAX_WORKERS="99" (expected an integer from 1 to 32); using default 4."#),
        "{stderr}"
    );
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn interrupt_hide_restore_and_snapshot() {
    let w = world(r#"{"turns": [{"steps": [{"delay_ms": 30000}, {"text": "late"}]}]}"#);
    let mut s = w.serve(COORD, &[("THREADBASE_MAX_WORKERS", "1")]);
    let v = tool(
        &mut s,
        "threads_spawn",
        spawn_params(&w, "slow", "Slow work"),
    );
    let slow = v["workerID"].as_str().unwrap().to_string();
    assert_eq!(v["outcome"], Value::Null);
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(top_status(&w.base.db, &list, &slow), "running");
    let e = error(&mut s, "threads_spawn", spawn_params(&w, "next", "Next"));
    assert_eq!(e["code"], "limit");
    let v = tool(&mut s, "threads_interrupt", json!({"workerID": slow}));
    assert_eq!(v["outcome"], "interrupted");
    assert_eq!(v["hidden"], false);
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(top_status(&w.base.db, &list, &slow), "interrupted");
    // The interrupted worker frees its slot; interrupting an idle worker changes nothing.
    let next = tool(&mut s, "threads_spawn", spawn_params(&w, "next", "Next"));
    let next_id = next["workerID"].as_str().unwrap().to_string();
    let v = tool(&mut s, "threads_interrupt", json!({"workerID": slow}));
    assert_eq!(v["outcome"], "interrupted");

    // hide keeps the worker listed and running.
    let v = tool(&mut s, "threads_hide", json!({"workerID": next_id}));
    assert_eq!(v["hidden"], true);
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(list["workers"].as_array().unwrap().len(), 2);
    assert_eq!(top_status(&w.base.db, &list, &next_id), "running");

    // A PASS report hides by default.
    let mut ws = w.serve(&slow, &[]);
    let r = tool(
        &mut ws,
        "threads_report",
        json!({"verdict": "PASS", "summary": "fine", "evidence": ["ok"]}),
    );
    assert_eq!(r["workerID"], slow.as_str());
    ws.close(Duration::from_secs(20));

    // snapshot: raw {workers}, read-only, any caller, unknown coordinators contribute nothing.
    let snap = call(
        &mut s,
        "threads.snapshot",
        json!({"coordinatorIDs": [COORD, "ses_nobody", COORD]}),
    );
    let workers = snap["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    let by_id = |id: &str| {
        workers
            .iter()
            .find(|v| v["workerID"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(by_id(&slow)["hidden"], true);
    assert_eq!(by_id(&slow)["report"]["verdict"], "PASS");
    assert_eq!(by_id(&next_id)["hidden"], true);
    assert_eq!(
        call(&mut s, "threads.snapshot", json!({"coordinatorIDs": []})),
        json!({"workers": []})
    );
    let e = error(
        &mut s,
        "threads.snapshot",
        json!({"coordinatorIDs": [COORD], "x": 1}),
    );
    assert_eq!(e["code"], "invalid_params");
    // restore: every hidden worker shows again, even the PASS one.
    let mut other = w.serve("ses_ui", &[]);
    let restored = call(
        &mut other,
        "threads.restore",
        json!({"coordinatorIDs": [COORD]}),
    );
    let hidden: Vec<&Value> = restored["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| &v["hidden"])
        .collect();
    assert_eq!(hidden, [&json!(false), &json!(false)]);
    assert_eq!(
        w.count("SELECT count(*) FROM threads WHERE coordinator_id IS NOT NULL AND hidden = 0"),
        2
    );
    other.close(Duration::from_secs(20));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn roles_and_report_dedupe_across_processes() {
    let w = world(QUICK);
    let mut s = w.serve(COORD, &[]);
    tool(
        &mut s,
        "threads_spawn",
        json!({"key": "review", "title": "Review", "directory": w.work(), "task": "Review it"}),
    );
    wait_view(&mut s, REVIEW_WORKER, |v| v["outcome"] == "succeeded");

    // Native children and managed workers cannot spawn; a coordinator cannot report.
    let mut native = w.serve(
        "ses_native",
        &[("PI_THREADS_SELF_ID", "thread_aaaaaaaaaaaa")],
    );
    let e = error(&mut native, "threads_spawn", spawn_params(&w, "x", "x"));
    assert_eq!(e["code"], "forbidden");
    assert!(message(&e)
        .starts_with("Native subagents and managed workers cannot spawn managed workers"));
    native.close(Duration::from_secs(20));
    let mut w1 = w.serve(REVIEW_WORKER, &[]);
    let e = error(&mut w1, "threads_spawn", spawn_params(&w, "x", "x"));
    assert!(message(&e)
        .starts_with("Native subagents and managed workers cannot spawn managed workers"));
    let e = error(
        &mut s,
        "threads_report",
        json!({"verdict": "PASS", "summary": "s", "evidence": []}),
    );
    assert_eq!(e["code"], "forbidden");
    assert!(message(&e).starts_with("Only a managed worker can call threads_report"));
    let e = error(
        &mut w1,
        "threads_report",
        json!({"verdict": "GOOD", "summary": "s", "evidence": []}),
    );
    assert_eq!(e["code"], "invalid_params");

    // The same report from two worker serves at once: one row, one notice, equal answers.
    let mut w2 = w.serve(REVIEW_WORKER, &[]);
    let report = json!({"verdict": "PASS WITH NOTES", "summary": "Looks good", "evidence": ["cargo test: ok", "ünïcode / \"q\""]});
    let a = w1.send("threads_report", report.clone());
    let b = w2.send("threads_report", report.clone());
    let ra = w1.response(a, Duration::from_secs(30));
    let rb = w2.response(b, Duration::from_secs(30));
    assert_eq!(ra["result"], rb["result"]);
    assert_eq!(
        ra["result"]["details"],
        json!({"workerID": REVIEW_WORKER, "report": report})
    );
    assert_eq!(w.count("SELECT count(*) FROM reports"), 1);
    assert_eq!(
        w.count("SELECT count(*) FROM mailbox WHERE direction = 'to_parent' AND kind = 'report'"),
        1
    );
    let (body, message_id, report_id): (String, String, String) = w
        .conn()
        .query_row(
            "SELECT mb.body, mb.message_id, t.report_message_id FROM mailbox mb JOIN threads t ON t.id = mb.thread_id WHERE mb.kind = 'report'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(message_id, report_id);
    assert_eq!(
        body,
        format!(
            "Managed worker {REVIEW_WORKER} (review) report:\n{}",
            serde_json::to_string(&report).unwrap()
        )
    );
    // Identical again: the original; different: refused.
    let again = tool(&mut w2, "threads_report", report.clone());
    assert_eq!(again["report"], report);
    let e = error(
        &mut w1,
        "threads_report",
        json!({"verdict": "FAIL", "summary": "Looks bad", "evidence": []}),
    );
    assert_eq!(e["code"], "conflict");
    assert!(message(&e).starts_with(
        "This worker already has a different report. Start a new task with a new spawn key."
    ));
    w1.close(Duration::from_secs(20));
    w2.close(Duration::from_secs(20));

    // The coordinator's view and list status; the notice reaches the coordinator's serve once.
    let v = wait_view(&mut s, REVIEW_WORKER, |v| !v["report"].is_null());
    assert_eq!(v["report"], report);
    assert_eq!(v["hidden"], true, "PASS WITH NOTES hides by default");
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(
        top_status(&w.base.db, &list, REVIEW_WORKER),
        "PASS WITH NOTES"
    );
    wait_until("the report notice", Duration::from_secs(10), || {
        s.notifications()
            .iter()
            .any(|n| n["method"] == "notice" && n["params"]["kind"] == "report")
    });
    let notices = s.notices();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0]["params"]["threadId"], REVIEW_WORKER);
    assert_eq!(notices[0]["params"]["messageId"], report_id.as_str());
    assert_eq!(notices[0]["params"]["text"], body.as_str());
    // A send to a reported worker shows it explicitly.
    tool(
        &mut s,
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "more", "text": "One more thing"}),
    );
    let v = wait_view(&mut s, REVIEW_WORKER, |_| true);
    assert_eq!(v["hidden"], false);
    let hidden: Option<i64> = w
        .conn()
        .query_row(
            "SELECT hidden FROM threads WHERE id = ?1",
            [REVIEW_WORKER],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(hidden, Some(0));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn directories_granted_paths_and_agent_profiles() {
    let w = world(QUICK);
    let mut s = w.serve(COORD, &[]);
    let root = &w.base.root;
    std::fs::write(root.join("a_file"), "x").unwrap();
    for d in ["alpha", "beta", "star*dir", "q?dir"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::os::unix::fs::symlink(root.join("beta"), root.join("beta_link")).unwrap();
    std::os::unix::fs::symlink("/", root.join("root_link")).unwrap();
    let p = |name: &str| root.join(name).display().to_string();
    let spawn = |paths: Value| json!({"key": "g", "title": "Grants", "directory": w.work(), "task": "Use grants", "paths": paths});
    tool(&mut s, "threads_list", json!({}));
    let before = w.count("SELECT count(*) FROM threads");

    for dir in [
        "work".to_string(),
        p("missing"),
        p("a_file"),
        "".to_string(),
    ] {
        let e = error(
            &mut s,
            "threads_spawn",
            json!({"key": "d", "title": "t", "directory": dir, "task": "x"}),
        );
        assert_eq!(e["code"], "invalid_params", "{dir}: {e}");
        if !dir.is_empty() {
            assert!(
                message(&e).starts_with("directory must be an existing absolute directory"),
                "{e}"
            );
        }
    }
    let cases: Vec<(Value, String)> = vec![
        (json!(["relative/dir"]), "Granted path must be absolute: relative/dir".into()),
        (json!([p("missing")]), format!("Granted path must be an existing directory: {}", p("missing"))),
        (json!([p("a_file")]), format!("Granted path must be an existing directory: {}", p("a_file"))),
        (json!(["/"]), "Granted path cannot be a filesystem root: /".into()),
        (json!([p("root_link")]), format!("Granted path cannot be a filesystem root: {}", p("root_link"))),
        (json!([p("star*dir")]), format!("Granted path contains a character that permission patterns cannot match literally: {}", p("star*dir"))),
        (json!([p("q?dir")]), "permission patterns cannot match literally".into()),
        (json!([p("alpha"), ""]), "paths items must be non-empty strings".into()),
        (json!((0..17).map(|_| p("alpha")).collect::<Vec<_>>()), "paths must list at most 16 directories, got 17".into()),
    ];
    for (paths, expected) in cases {
        let e = error(&mut s, "threads_spawn", spawn(paths.clone()));
        assert_eq!(e["code"], "invalid_params", "{paths}: {e}");
        assert!(message(&e).contains(&expected), "{paths}: {e}");
        assert!(message(&e).contains("Repair:"), "{e}");
    }
    assert_eq!(
        w.count("SELECT count(*) FROM threads"),
        before,
        "rejected spawns write nothing"
    );

    // Symlinks resolve, duplicates go, the list is sorted; 16 entries are fine.
    let mut sixteen = vec![p("beta_link"), p("alpha"), p("beta")];
    sixteen.extend((0..13).map(|_| p("alpha")));
    let v = tool(&mut s, "threads_spawn", spawn(json!(sixteen)));
    let id = v["workerID"].as_str().unwrap().to_string();
    let granted: String = w
        .conn()
        .query_row(
            "SELECT granted_paths FROM threads WHERE id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&granted).unwrap(),
        json!([p("alpha"), p("beta")])
    );
    let fp: String = w
        .conn()
        .query_row(
            "SELECT fingerprint FROM threads WHERE id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        fp,
        threadbase::contract::worker::fingerprint(
            "Grants",
            &w.work(),
            "Use grants",
            None,
            Some(&[p("alpha"), p("beta")])
        )
    );
    wait_until("the prompt", Duration::from_secs(10), || {
        w.user_messages(&id).len() == 1
    });
    assert!(w.user_messages(&id)[0].contains(&format!(
        "Work only within the assigned scope. You may also use these granted directories when the task requires them: {}, {}. You may use",
        p("alpha"),
        p("beta")
    )));
    // The same grants spelled differently are the same request; other grants are not.
    let v = tool(
        &mut s,
        "threads_spawn",
        spawn(json!([p("beta"), p("alpha")])),
    );
    assert_eq!(v["workerID"], id.as_str());
    let e = error(&mut s, "threads_spawn", spawn(json!([p("alpha")])));
    assert_eq!(e["code"], "conflict");

    // Agent profiles: missing, invalid, and one that picks the model.
    let e = error(
        &mut s,
        "threads_spawn",
        json!({"key": "r", "title": "t", "directory": w.work(), "task": "x", "agent": "reviewer"}),
    );
    assert_eq!(e["code"], "invalid_params");
    assert!(
        message(&e).starts_with("Unknown agent \"reviewer\": no profile at"),
        "{e}"
    );
    assert!(message(&e).contains("Repair:"));
    let agents = root.join("agent").join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("bad.json"), r#"{"args": ["--session", "x"]}"#).unwrap();
    let e = error(
        &mut s,
        "threads_spawn",
        json!({"key": "r", "title": "t", "directory": w.work(), "task": "x", "agent": "bad"}),
    );
    assert!(message(&e).contains("Unsupported child Pi arg"), "{e}");
    let e = error(
        &mut s,
        "threads_spawn",
        json!({"key": "r", "title": "t", "directory": w.work(), "task": "x", "agent": "../bad"}),
    );
    assert!(message(&e).starts_with("Unknown agent \"../bad\""), "{e}");
    std::fs::write(
        agents.join("reviewer.json"),
        r#"{"args": ["--model", "prov/model-one"]}"#,
    )
    .unwrap();
    let v = tool(
        &mut s,
        "threads_spawn",
        json!({"key": "r", "title": "t", "directory": w.work(), "task": "x", "agent": "reviewer"}),
    );
    assert_eq!(v["agent"], "reviewer");
    assert_eq!(v["model"], json!({"providerID": "prov", "id": "model-one"}));
    let e = error(
        &mut s,
        "threads_spawn",
        json!({"key": "r", "title": "t", "directory": w.work(), "task": "x"}),
    );
    assert_eq!(
        e["code"], "conflict",
        "dropping the agent changes the request"
    );
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn a_rejected_prompt_is_a_failed_run_and_stays_pending() {
    let w = world(r#"{"reject_prompts": "No API key found for scripted."}"#);
    let mut s = w.serve(COORD, &[("THREADBASE_MAX_WORKERS", "1")]);
    let v = tool(&mut s, "threads_spawn", spawn_params(&w, "review", "Task"));
    assert_eq!(v["outcome"], "failed");
    assert_eq!(
        w.count("SELECT count(*) FROM mailbox WHERE state = 'pending' AND direction = 'to_child'"),
        1
    );
    assert_eq!(
        top_status(
            &w.base.db,
            &tool(&mut s, "threads_list", json!({})),
            REVIEW_WORKER
        ),
        "failed"
    );
    // A failed worker frees its slot.
    tool(&mut s, "threads_spawn", spawn_params(&w, "other", "Task"));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn a_crashed_coordinator_leaves_an_interrupted_worker_that_a_retry_relaunches() {
    let w = world(r#"{"turns": [{"steps": [{"delay_ms": 30000}, {"text": "late"}]}]}"#);
    let mut s = w.serve(COORD, &[("THREADBASE_MAX_WORKERS", "1")]);
    let params = spawn_params(&w, "review", "Long task");
    tool(&mut s, "threads_spawn", params.clone());
    wait_until("the prompt", Duration::from_secs(10), || {
        w.user_messages(REVIEW_WORKER).len() == 1
    });
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    // The next serve of any session restores the orphan: closed as stale, its process killed.
    let mut s = w.serve(COORD, &[("THREADBASE_MAX_WORKERS", "1")]);
    wait_until("the orphan to be killed", Duration::from_secs(10), || {
        w.worker_processes(REVIEW_WORKER).is_empty()
    });
    let snap = call(
        &mut s,
        "threads.snapshot",
        json!({"coordinatorIDs": [COORD]}),
    );
    assert_eq!(snap["workers"][0]["outcome"], "interrupted");
    // Its slot is free; the identical retry relaunches it without re-sending the prompt.
    let v = tool(&mut s, "threads_spawn", params);
    assert_eq!(v["outcome"], "interrupted");
    assert_eq!(w.worker_processes(REVIEW_WORKER).len(), 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(w.user_messages(REVIEW_WORKER).len(), 1);
    tool(&mut s, "threads_spawn", spawn_params(&w, "next", "Next"));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

/// The original sets a worker's model from its runtime at spawn: with the coordinator's model
/// known (its argv, `--parent-args`), the spawn's view already carries it; without one it is
/// learnt from the session after the first run (see `spawn_is_idempotent_and_delivers_the_initial_prompt_once`).
#[test]
fn the_coordinators_model_is_the_workers_model_at_spawn() {
    let w = world(QUICK);
    for (parent_args, want) in [
        (
            r#"["pi","--model","prov/parent-model"]"#,
            json!({"providerID": "prov", "id": "parent-model"}),
        ),
        (
            r#"["pi","--provider","prov","--model","parent-model"]"#,
            json!({"providerID": "prov", "id": "parent-model"}),
        ),
        // Pi takes no inline `--model=…` (it would be an unknown extension flag): no model is
        // known from it, so none is shown until the session tells it.
        (r#"["pi","--model=prov/inline-model"]"#, Value::Null),
    ] {
        let mut s = w.serve_with(COORD, &[], &["--parent-args", parent_args]);
        let key = format!("k{}", threadbase::ids::random_hex(4));
        let v = tool(
            &mut s,
            "threads_spawn",
            json!({"key": key, "title": "T", "directory": w.work(), "task": "Check"}),
        );
        // Without a model from the coordinator's argv, none is shown until the session says
        // one: the scripted worker's run may already have told it by the time spawn answers.
        let learnt = json!({"providerID": "scripted", "id": "scripted-model"});
        if want.is_null() {
            assert!(
                v["model"].is_null() || v["model"] == learnt,
                "{parent_args}: {v}"
            );
        } else {
            assert_eq!(v["model"], want, "{parent_args}: {v}");
        }
        let id = v["workerID"].as_str().unwrap().to_string();
        let list = tool(&mut s, "threads_list", json!({}));
        let listed = list["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["workerID"] == id.as_str())
            .unwrap()
            .clone();
        if want.is_null() {
            assert!(
                listed["model"].is_null() || listed["model"] == learnt,
                "{parent_args}: {list}"
            );
        } else {
            assert_eq!(listed["model"], want, "{parent_args}: {list}");
        }
        let v = wait_view(&mut s, &id, |v| v["outcome"] == "succeeded");
        if want.is_null() {
            assert_eq!(
                v["model"],
                json!({"providerID": "scripted", "id": "scripted-model"})
            );
        }
        s.close(Duration::from_secs(20));
    }
    assert!(w.base.leftovers().is_empty());
}

/// Error texts: the original's sentence (opzero1/threads), then what threadbase adds, the ids
/// the error concerns and a ` Repair: …` (docs/fidelity.md, "Contract C"); where the original lets another error through (OpenCode's session-not-found
/// for an unknown workerID, a schema error for a report from a session that is not a worker) the
/// sentence is threadbase's.
#[test]
fn error_texts_are_the_originals_sentence_then_ids_and_a_repair() {
    let w = world(QUICK);
    let mut s = w.serve(COORD, &[("THREADBASE_MAX_WORKERS", "1")]);
    // The text before ` Repair: `, and the repair.
    let split = |e: &Value| -> (String, String) {
        let (head, repair) = message(e)
            .split_once(" Repair: ")
            .unwrap_or_else(|| panic!("no Repair: in {e}"));
        assert!(!repair.trim().is_empty(), "{e}");
        (head.to_string(), repair.to_string())
    };
    let head = |e: &Value| split(e).0;

    let params = spawn_params(&w, "review", "Check");
    tool(&mut s, "threads_spawn", params.clone());
    let mut changed = params.clone();
    changed["task"] = json!("Other");
    let e = error(&mut s, "threads_spawn", changed);
    assert_eq!(
        head(&e),
        format!("This spawn key already belongs to a different request (worker {REVIEW_WORKER}).")
    );
    let e = error(&mut s, "threads_spawn", spawn_params(&w, "second", "More"));
    assert_eq!(head(&e), "Coordinator worker limit reached (1).");
    let mut relative = spawn_params(&w, "third", "x");
    relative["directory"] = json!("work");
    let e = error(&mut s, "threads_spawn", relative);
    assert_eq!(
        head(&e),
        r#"directory must be an existing absolute directory (got "work")."#
    );
    let mut granted = spawn_params(&w, "third", "x");
    granted["paths"] = json!(["refs"]);
    let e = error(&mut s, "threads_spawn", granted);
    assert_eq!(head(&e), "Granted path must be absolute: refs.");

    let send = json!({"workerID": REVIEW_WORKER, "key": "k1", "text": "Second"});
    tool(&mut s, "threads_send", send);
    let e = error(
        &mut s,
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "k1", "text": "Different"}),
    );
    assert_eq!(
        head(&e),
        format!("This send key already belongs to different text (message {K1_MESSAGE}).")
    );

    let mut other = w.serve("ses_other", &[]);
    let e = error(
        &mut other,
        "threads_hide",
        json!({"workerID": REVIEW_WORKER}),
    );
    let (h, repair) = split(&e);
    assert_eq!(h, "Only the owning coordinator may control this worker.");
    for id in [REVIEW_WORKER, COORD, "ses_other"] {
        assert!(repair.contains(id), "{e}");
    }
    other.close(Duration::from_secs(20));

    // threadbase's own sentences.
    let unknown = "ses_00000000000000000000000000000000";
    let e = error(&mut s, "threads_interrupt", json!({ "workerID": unknown }));
    assert_eq!(head(&e), format!("Unknown managed worker: \"{unknown}\"."));
    let report = json!({"verdict": "PASS", "summary": "s", "evidence": []});
    let e = error(&mut s, "threads_report", report.clone());
    assert_eq!(
        head(&e),
        format!(
            "Only a managed worker can call threads_report, and this session ({COORD}) is not one."
        )
    );

    // The report conflict: the original's two sentences, then the repair.
    let mut worker = w.serve(REVIEW_WORKER, &[]);
    tool(&mut worker, "threads_report", report);
    let e = error(
        &mut worker,
        "threads_report",
        json!({"verdict": "FAIL", "summary": "s", "evidence": []}),
    );
    assert_eq!(
        head(&e),
        "This worker already has a different report. Start a new task with a new spawn key."
    );
    worker.close(Duration::from_secs(20));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

/// Issue 30, `THREADBASE_QUEUE=1`: a spawn over the slot limit is recorded and queued (its view
/// says `status: "queued (position N)"`) instead of refused; a queued worker interrupted before
/// its launch never starts; when a slot frees the oldest queued worker is brought up with its
/// prompt.
#[test]
fn queue_a_spawn_over_the_slot_limit_waits_and_starts_when_a_slot_frees() {
    let w = world(
        r#"{"turns": [{"steps": [{"delay_ms": 30000}, {"text": "late"}]}], "default_reply": "done: {prompt}"}"#,
    );
    let mut s = w.serve(
        COORD,
        &[("THREADBASE_MAX_WORKERS", "1"), ("THREADBASE_QUEUE", "1")],
    );
    let slow = tool(
        &mut s,
        "threads_spawn",
        spawn_params(&w, "slow", "Slow work"),
    );
    let slow = slow["workerID"].as_str().unwrap().to_string();
    assert!(slow.starts_with("ses_"));
    let q1 = tool(
        &mut s,
        "threads_spawn",
        spawn_params(&w, "q1", "First queued"),
    );
    assert_eq!(q1["status"], "queued (position 1)", "{q1}");
    assert_eq!(q1["outcome"], Value::Null, "{q1}");
    let q1 = q1["workerID"].as_str().unwrap().to_string();
    let q2 = tool(
        &mut s,
        "threads_spawn",
        spawn_params(&w, "q2", "Second queued"),
    );
    assert_eq!(q2["status"], "queued (position 2)", "{q2}");
    let q2 = q2["workerID"].as_str().unwrap().to_string();
    // The identical retry of a queued spawn answers the same queued worker.
    let again = tool(
        &mut s,
        "threads_spawn",
        spawn_params(&w, "q1", "First queued"),
    );
    assert_eq!(again["workerID"], q1.as_str());
    // Interrupted while queued: never launched.
    let v = tool(&mut s, "threads_interrupt", json!({"workerID": q2}));
    assert_eq!(v["outcome"], "interrupted", "{v}");
    assert!(v.get("status").is_none(), "{v}");
    // The busy worker's interrupt frees the slot: q1 comes up with its prompt.
    tool(&mut s, "threads_interrupt", json!({"workerID": slow}));
    let v = wait_view(&mut s, &q1, |v| v.get("status").is_none());
    assert_eq!(common::keys(&v), common::WORKER_VIEW_KEYS, "{v}");
    wait_until("q1's launch", Duration::from_secs(20), || {
        w.count(&format!("SELECT launch_seq FROM threads WHERE id = '{q1}'")) == 1
    });
    wait_until("q1's prompt", Duration::from_secs(20), || {
        w.user_messages(&q1)
            .iter()
            .any(|m| m.starts_with("First queued"))
    });
    let launched: Vec<(String, i64)> = w
        .conn()
        .prepare("SELECT id, launch_seq FROM threads ORDER BY rowid")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(launched, [(slow, 1), (q1, 1), (q2, 0)]);
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}
