//! Contract B (`agent_*`) through real `threadbase serve` processes whose children are
//! `threadbase scripted-agent` processes. A child agent's own serve is a second serve started
//! with `--scope-path /root/a` and the root session id, exactly what the Pi extension starts
//! inside a child Pi.

use crate::support::serve_client;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_client::{session_user_texts as user_texts, Scripted, Serve};
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
        let conn = rusqlite::Connection::open(&self.base.db).unwrap();
        let mut stmt = conn.prepare(query).unwrap();
        let n = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                (0..n)
                    .map(|i| {
                        Ok(match r.get_ref(i)? {
                            rusqlite::types::ValueRef::Null => Value::Null,
                            rusqlite::types::ValueRef::Integer(x) => json!(x),
                            rusqlite::types::ValueRef::Real(x) => json!(x),
                            rusqlite::types::ValueRef::Text(t) => {
                                json!(String::from_utf8_lossy(t))
                            }
                            rusqlite::types::ValueRef::Blob(_) => json!("<blob>"),
                        })
                    })
                    .collect()
            })
            .unwrap();
        rows.map(Result::unwrap).collect()
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

#[test]
fn spawn_wait_status_output_and_notice() {
    let w = world();
    let mut root = w.root("quick", &[]);
    let v = spawn(&mut root, "fix-auth", "fix the login");
    assert_eq!(v["path"], "/root/fix-auth");
    assert_eq!(v["parent"], "/root");
    assert_eq!(v["state"], "completed");
    assert_eq!(v["status"], "Completed; session retained");
    assert_eq!(v["output"], "answer to fix the login");
    assert_eq!(v["task"], "fix the login");

    // The child transcript: in the main session directory, named after the path, linked to
    // the parent, seeded with the parent's context minus the system prompt and errored turns.
    let file = PathBuf::from(v["sessionFile"].as_str().unwrap());
    assert_eq!(file.parent(), w.root_session.parent());
    let lines = session_lines(&file);
    assert_eq!(
        lines[0]["parentSession"],
        w.root_session.display().to_string()
    );
    assert!(lines
        .iter()
        .any(|e| e["type"] == "session_info" && e["name"] == "worker /root/fix-auth"));
    let texts: String = lines.iter().map(|l| l.to_string()).collect();
    assert!(texts.contains("the main question") && texts.contains("the main answer"));
    assert!(!texts.contains("SYSTEM PROMPT") && !texts.contains("broken"));
    assert_eq!(
        user_texts(&file),
        vec!["the main question", "fix the login"]
    );

    // Status (one and all), output pages.
    let st = call(&mut root, "agent_status", json!({"path": "/root/fix-auth"}));
    assert_eq!(st["state"], "completed");
    // Without a path: the bare list of views (the original's `threads().list()`).
    let all = call(&mut root, "agent_status", json!({}));
    assert_eq!(all.as_array().unwrap().len(), 1, "{all}");
    assert_eq!(all[0]["path"], "/root/fix-auth");
    let page = call(
        &mut root,
        "agent_output",
        json!({"path": "fix-auth", "offset": 7, "limit": 2}),
    );
    assert_eq!(
        page,
        json!({"path": "/root/fix-auth", "text": "to", "totalCharacters": 23, "nextOffset": 9})
    );

    // The blocking spawn returned the answer, so no notice repeats it: the settlement's
    // notice row is marked delivered without being sent.
    wait_for("the notice row superseded", Duration::from_secs(5), || {
        w.sql("SELECT count(*) FROM mailbox WHERE direction = 'to_parent' AND state = 'pending'")[0]
            [0]
            == 0
    });
    std::thread::sleep(Duration::from_millis(400));
    assert!(notices(&root).is_empty(), "{:?}", notices(&root));

    // A spawn that does not wait gets its answer as a notice, once, without a turn of its own.
    let v = spawn_detached(&mut root, "notify-me", "tell me later");
    assert_ne!(v["state"], "completed");
    wait_for("completion notice", Duration::from_secs(5), || {
        !notices(&root).is_empty()
    });
    std::thread::sleep(Duration::from_millis(300));
    let n = notices(&root);
    assert_eq!(n.len(), 1, "{n:?}");
    assert_eq!(
        n[0]["text"],
        "Agent /root/notify-me completed. Final answer:\nanswer to tell me later"
    );
    assert_eq!(n[0]["state"], "completed");

    // The settled child's process is retired; the row keeps the session.
    wait_for("process retired", Duration::from_secs(10), || {
        w.sql("SELECT status FROM threads WHERE path = '/root/fix-auth'")[0][0] == "closed"
    });
    // Steering a completed thread resumes it in the same session file.
    let v = call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/fix-auth", "message": "and the logout"}),
    );
    assert!(matches!(
        v["state"].as_str(),
        Some("starting" | "running" | "completed")
    ));
    let v = call(&mut root, "agent_wait", json!({"path": "/root/fix-auth"}));
    assert_eq!(v["state"], "completed");
    assert_eq!(v["output"], "answer to and the logout");
    assert_eq!(v["sessionFile"], file.display().to_string());
    assert_eq!(
        user_texts(&file),
        vec!["the main question", "fix the login", "and the logout"]
    );
    assert_eq!(
        w.sql("SELECT count(*) FROM mailbox WHERE direction = 'to_child' AND state = 'delivered'")
            [0][0],
        1
    );
    // agent_wait returned the resumed run's answer: no notice for it either.
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        !notices(&root).iter().any(|n| n["path"] == "/root/fix-auth"),
        "{:?}",
        notices(&root)
    );
    drop(root);
    w.finish(10);
}

#[test]
fn a_wait_holds_progress_notices_and_releases_them_when_it_times_out() {
    let w = world();
    let mut root = w.root("slow", &[]);
    spawn_detached(&mut root, "a", "lead");
    let mut a = w.child("/root/a", "slow");
    // The root waits (briefly) on /root/a while /root/a reports progress.
    let wait = root.send("agent_wait", json!({"path": "/root/a", "timeoutMs": 1200}));
    std::thread::sleep(Duration::from_millis(200));
    call(&mut a, "agent_update", json!({"message": "halfway there"}));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        notices(&root).is_empty(),
        "held while the wait runs: {:?}",
        notices(&root)
    );
    let r = root.response(wait, Duration::from_secs(10));
    assert_eq!(r["result"]["details"]["state"], "running", "{r}");
    // The wait timed out with the thread still working: the progress is news, delivered now.
    wait_for(
        "progress notice after the wait",
        Duration::from_secs(3),
        || {
            notices(&root)
                .iter()
                .any(|n| n["text"] == "Progress from /root/a: halfway there")
        },
    );
    // Waiting until it settles returns the answer; its completion notice is not sent.
    let v = call(&mut root, "agent_wait", json!({"path": "/root/a"}));
    assert_eq!(v["state"], "completed", "{v}");
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(notices(&root).len(), 1, "{:?}", notices(&root));
    drop(a);
    drop(root);
    w.finish(10);
}

#[test]
fn paths_access_and_spawn_checks() {
    let w = world();
    let mut root = w.root_with_args(
        "slow",
        &[
            ("PI_SUBAGENTS_MAX_CONCURRENT", "3"),
            ("PI_SUBAGENTS_MAX_THREADS", "5"),
        ],
        r#"["pi","--model","prov/big-model","--thinking","high"]"#,
    );
    for (path, needle) in [
        (" a", "must not be empty or contain surrounding whitespace"),
        ("", "must not be empty"),
        ("a/../b", "no dot segments"),
        ("a%2Fb", "no dot segments, escapes"),
        ("a/", "trailing slash"),
        ("/root//a", "empty segments"),
    ] {
        refused(
            &mut root,
            "agent_spawn",
            json!({"path": path, "type": "worker", "task": "t", "wait": false}),
            Some("invalid_params"),
            Has(needle),
        );
    }
    refused(
        &mut root,
        "agent_spawn",
        json!({"path": "/root/x/y", "type": "worker", "task": "t"}),
        Some("unknown_reference"),
        Starts("Unknown thread /root/x. Repair:"),
    );
    refused(
        &mut root,
        "agent_spawn",
        json!({"path": "a", "type": "worker", "task": "  ", "wait": false}),
        Some("invalid_params"),
        Starts("Task must not be empty. Repair:"),
    );
    refused(
        &mut root,
        "agent_stop",
        json!({"path": "/root"}),
        Some("forbidden"),
        Any,
    );

    // Mixed case and '-' are allowed; levels: /root/A is 2, /root/A/b 3, deeper fails.
    let a = spawn_detached(&mut root, "/root/Work-A", "a");
    assert_eq!(
        (&a["state"], &a["status"]),
        (&json!("starting"), &json!("Starting"))
    );
    // Model and thinking come from the parent's argv.
    let pid = w.sql("SELECT pid FROM threads WHERE path = '/root/Work-A'")[0][0]
        .as_i64()
        .unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let argv: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let after = |flag: &str| {
        argv.iter()
            .position(|a| a == flag)
            .map(|i| argv[i + 1].clone())
    };
    assert_eq!(
        after("--model").as_deref(),
        Some("prov/big-model"),
        "{argv:?}"
    );
    assert_eq!(after("--thinking").as_deref(), Some("high"), "{argv:?}");
    assert_eq!(after("--name").as_deref(), Some("worker /root/Work-A"));
    refused(
        &mut root,
        "agent_spawn",
        json!({"path": "Work-A", "type": "worker", "task": "again", "wait": false}),
        Some("conflict"),
        Has("Thread /root/Work-A already exists; use agent_steer to resume it"),
    );
    spawn_detached(&mut root, "/root/Work-A/b", "b");
    refused(
        &mut root,
        "agent_spawn",
        json!({"path": "/root/Work-A/b/c", "type": "worker", "task": "c", "wait": false}),
        Some("limit"),
        Has("Agent depth limit reached"),
    );
    // Independent root /k is level 2; /k/l level 3.
    spawn_detached(&mut root, "/k", "k");
    refused(
        &mut root,
        "agent_spawn",
        json!({"path": "/k/l", "type": "worker", "task": "l", "wait": false}),
        Some("limit"),
        Starts("Concurrent thread limit reached; wait for a thread to settle"),
    );

    // A child's serve: descendants only, immediate children only, its identity from scope.
    let mut a = w.child("/root/Work-A", "quick");
    let descendants_only = Has(
        "/root/Work-A may address only its descendants (not siblings, unrelated trees or ancestors)",
    );
    for target in ["/root/other", "/root", "/k", "/root/Work-AB"] {
        let params = json!({"path": target});
        refused(
            &mut a,
            "agent_wait",
            params,
            Some("forbidden"),
            descendants_only,
        );
    }
    refused(
        &mut a,
        "agent_stop",
        json!({"path": "/root/Work-A"}),
        Some("forbidden"),
        Any,
    );
    // Reading itself is allowed.
    let me = call(&mut a, "agent_status", json!({"path": "/root/Work-A"}));
    assert_eq!(me["state"], "running");
    refused(
        &mut a,
        "agent_spawn",
        json!({"path": "b/deeper", "type": "worker", "task": "t", "wait": false}),
        Some("forbidden"),
        Has("An agent may spawn only its immediate children"),
    );
    // The child sees only its subtree.
    let mine = call(&mut a, "agent_status", json!({}));
    let paths: Vec<&str> = mine
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, vec!["/root/Work-A", "/root/Work-A/b"]);
    // agent_update / agent_pause are for children; the root has no parent.
    refused(
        &mut root,
        "agent_update",
        json!({"message": "hi"}),
        Some("forbidden"),
        Any,
    );

    // Total limit counts settled threads too.
    call(&mut root, "agent_stop", json!({"path": "/root/Work-A"}));
    spawn_detached(&mut root, "/k/l", "l");
    spawn_detached(&mut root, "/m", "m");
    refused(
        &mut root,
        "agent_spawn",
        json!({"path": "/n", "type": "worker", "task": "n", "wait": false}),
        Some("limit"),
        Starts("Total thread limit reached"),
    );
    // A stopped thread's children cannot be spawned or steered until it resumes; a stopped
    // child cannot spawn at all.
    refused(
        &mut root,
        "agent_steer",
        json!({"path": "/root/Work-A/b", "message": "go"}),
        Some("conflict"),
        Has("Cannot continue under stopped ancestor /root/Work-A; resume it first"),
    );
    refused(
        &mut a,
        "agent_spawn",
        json!({"path": "c", "type": "worker", "task": "t", "wait": false}),
        Some("forbidden"),
        Has("Only a working agent may spawn children"),
    );
    // Stopping /k stops its working child too; spawning under it is then refused.
    call(&mut root, "agent_stop", json!({"path": "/k"}));
    assert_eq!(
        call(&mut root, "agent_status", json!({"path": "/k/l"}))["state"],
        "stopped"
    );
    call(&mut root, "agent_stop", json!({"path": "/m"}));
    // Unknown methods of the family, and strict fields.
    refused(
        &mut root,
        "agent_status",
        json!({"path": "/k", "verbose": true}),
        Some("invalid_params"),
        Has("unknown field \"verbose\""),
    );
    drop(a);
    drop(root);
    w.all_gone(15);
}

#[test]
fn pause_update_steer_fail_and_stop_cascade_across_serves() {
    let w = world();
    let mut root = w.root("slow", &[]);
    // /root/a works; its own serve spawns /root/a/b (slow) and /root/a/c (quick).
    spawn_detached(&mut root, "a", "lead");
    let mut a = w.child("/root/a", "slow");
    let mut a_quick = w.child("/root/a", "quick");
    spawn_detached(&mut a, "b", "dig");
    let c = spawn(&mut a_quick, "c", "check");
    assert_eq!(c["state"], "completed");

    // Progress from a child reaches the parent's serve as a notice, quickly.
    let sent = Instant::now();
    let v = call(&mut a, "agent_update", json!({"message": "halfway there"}));
    assert_eq!(v["status"], "halfway there");
    wait_for("progress notice", Duration::from_secs(5), || {
        notices(&root)
            .iter()
            .any(|n| n["text"] == "Progress from /root/a: halfway there")
    });
    eprintln!(
        "agent_update → parent notice: {} ms",
        sent.elapsed().as_millis()
    );
    // The completion of /root/a/c was addressed to /root/a, not to the root; /root/a's
    // blocking spawn already returned it, so it was marked delivered without being sent.
    let c_notice = w.sql(
        "SELECT mb.recipient_path, mb.state FROM mailbox mb JOIN threads t ON t.id = mb.thread_id
         WHERE t.path = '/root/a/c' AND mb.direction = 'to_parent'",
    );
    assert_eq!(c_notice, vec![vec![json!("/root/a"), json!("delivered")]]);
    assert!(!notices(&root).iter().any(|n| n["path"] == "/root/a/c"));
    assert!(!notices(&a)
        .iter()
        .chain(notices(&a_quick).iter())
        .any(|n| n["path"] == "/root/a/c"));

    // Stop /root/a from the root: /root/a/b (held by another serve) is stopped through a
    // command row, /root/a/c stays completed, /root/a is stopped.
    let v = call(&mut root, "agent_stop", json!({"path": "/root/a"}));
    assert_eq!(v["state"], "stopped", "{v}");
    assert_eq!(v["status"], "Stopped; session retained");
    // The root stopped it itself and got the stopped view: no notice repeats that.
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        !notices(&root)
            .iter()
            .any(|n| n["path"] == "/root/a" && n["state"] == "stopped"),
        "{:?}",
        notices(&root)
    );
    let st = call(&mut root, "agent_status", json!({}));
    let state_of = |p: &str| {
        st.as_array()
            .unwrap()
            .iter()
            .find(|t| t["path"] == p)
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(state_of("/root/a/b"), "stopped");
    assert_eq!(state_of("/root/a/c"), "completed");
    assert_eq!(
        w.sql("SELECT count(*) FROM commands WHERE kind = 'stop' AND state = 'done'")[0][0],
        1
    );
    // Steering under the stopped ancestor is refused; resuming the ancestor first works.
    refused(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a/b", "message": "go on"}),
        Some("conflict"),
        Any,
    );
    let v = call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a", "message": "carry on"}),
    );
    assert_eq!(
        (&v["state"], &v["status"]),
        (&json!("starting"), &json!("Starting"))
    );

    // Pause from the child: it settles paused with the reason at the end of its run.
    let p = call(
        &mut a,
        "agent_pause",
        json!({"reason": "need the API decision"}),
    );
    assert_eq!(
        p,
        json!({"path": "/root/a", "pauseRequested": true, "status": "need the API decision"})
    );
    // The root is not waiting, so the paused settlement reaches it as a notice.
    wait_for("paused notice", Duration::from_secs(5), || {
        notices(&root).iter().any(|n| {
            n["text"] == "Agent /root/a is paused: need the API decision. No answer handback; send input to resume the same session."
        })
    });
    let v = call(&mut root, "agent_wait", json!({"path": "/root/a"}));
    assert_eq!(v["state"], "paused");
    assert_eq!(v["status"], "need the API decision");
    assert!(v.get("output").is_none());
    let out = call(&mut root, "agent_output", json!({"path": "/root/a"}));
    assert_eq!(out["text"], "");
    // A wait with a timeout returns the current view and never kills.
    call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a", "message": "use REST"}),
    );
    let t0 = Instant::now();
    let v = call(
        &mut root,
        "agent_wait",
        json!({"path": "/root/a", "timeoutMs": 300}),
    );
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(v["state"], "running");
    // Steering a running thread goes into Pi's steering queue of the same run.
    call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a", "message": "also add docs"}),
    );
    let v = call(&mut root, "agent_wait", json!({"path": "/root/a"}));
    assert_eq!(v["state"], "completed");
    let file = PathBuf::from(v["sessionFile"].as_str().unwrap());
    let texts = user_texts(&file);
    for m in ["lead", "carry on", "use REST", "also add docs"] {
        assert_eq!(
            texts.iter().filter(|t| *t == m).count(),
            1,
            "{m}: {texts:?}"
        );
    }
    assert_eq!(
        w.sql("SELECT count(*) FROM mailbox WHERE direction = 'to_child' AND state <> 'delivered'")
            [0][0],
        0
    );

    // A model error: failed, error kept; a steer resumes it.
    let mut failing = w.root("failing", &[]);
    let v = spawn(&mut failing, "f", "try");
    assert_eq!(v["state"], "failed");
    assert!(
        v["error"].as_str().unwrap().contains("model exploded"),
        "{v}"
    );
    drop((a, a_quick, failing));
    drop(root);
    w.finish(15);
}

#[test]
fn crash_restore_pauses_and_mailboxes_deliver_exactly_once() {
    let w = world();
    let mut root = w.root("slow", &[]);
    let v = spawn_detached(&mut root, "a", "long job");
    let file = PathBuf::from(v["sessionFile"].as_str().unwrap());
    spawn_detached(&mut root, "/k", "independent");
    // A notice waiting for the root: written, not yet claimed by any serve.
    wait_for("running", Duration::from_secs(5), || {
        w.sql("SELECT count(*) FROM threads WHERE agent_state = 'running'")[0][0] == 2
    });
    // SIGKILL the owning serve mid-run.
    root.child.kill().unwrap();
    root.child.wait().unwrap();
    // Rows written by a process that died before delivering them: a steer never sent, one the
    // child already consumed (its task is in the transcript), and a notice for /root.
    let now = threadbase::time::now_iso();
    let conn = rusqlite::Connection::open(&w.base.db).unwrap();
    let id: String = conn
        .query_row("SELECT id FROM threads WHERE path = '/root/a'", [], |r| {
            r.get(0)
        })
        .unwrap();
    conn.execute(
        "INSERT INTO mailbox (thread_id, direction, kind, send_key, body, created_at) VALUES (?1, 'to_child', 'steer', 'lost-1', 'pending steer', ?2)",
        (&id, &now),
    )
    .unwrap();
    conn.execute(
        "INSERT INTO mailbox (thread_id, direction, kind, send_key, body, created_at) VALUES (?1, 'to_child', 'steer', 'lost-2', 'long job', '2000-01-01T00:00:00.000Z')",
        [&id],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO mailbox (thread_id, direction, kind, send_key, body, recipient_path, created_at) VALUES (?1, 'to_parent', 'progress', 'lost-3', 'Progress from /root/a: saved', '/root', ?2)",
        (&id, &now),
    )
    .unwrap();
    drop(conn);
    wait_for("children gone", Duration::from_secs(10), || {
        w.base.leftovers().is_empty()
    });

    // The next serve restores: working threads come back paused, nothing restarts.
    let mut root = w.root("quick", &[]);
    let st = call(&mut root, "agent_status", json!({}));
    for t in st.as_array().unwrap() {
        assert_eq!(t["state"], "paused", "{t}");
        assert_eq!(t["status"], "Interrupted by reload; send input to resume");
        assert!(t.get("output").is_none());
    }
    assert!(w.base.leftovers().iter().all(|p| *p == root.child.id()));
    check_clean(&w.base.db);
    // The saved notice is delivered once.
    wait_for("saved notice", Duration::from_secs(5), || {
        notices(&root)
            .iter()
            .any(|n| n["text"] == "Progress from /root/a: saved")
    });
    // Resume: the unsent steer runs first, the consumed one is not repeated, the new one follows.
    call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a", "message": "resume please"}),
    );
    let v = call(&mut root, "agent_wait", json!({"path": "/root/a"}));
    assert_eq!(v["state"], "completed", "{v}");
    let texts = user_texts(&file);
    for m in ["long job", "pending steer", "resume please"] {
        assert_eq!(
            texts.iter().filter(|t| *t == m).count(),
            1,
            "{m}: {texts:?}"
        );
    }
    wait_for("every mailbox row consumed", Duration::from_secs(5), || {
        w.sql("SELECT count(*) FROM mailbox WHERE state = 'pending'")[0][0] == 0
    });
    drop(root);
    // A later serve of the same session delivers nothing again.
    let root = w.root("quick", &[]);
    std::thread::sleep(Duration::from_millis(400));
    assert!(notices(&root)
        .iter()
        .all(|n| n["text"] != "Progress from /root/a: saved"));
    drop(root);

    // Closing a serve stops its working threads: they read stopped, not interrupted.
    let mut root = w.root("slow", &[]);
    call(
        &mut root,
        "agent_steer",
        json!({"path": "/k", "message": "work again"}),
    );
    assert!(root.close(Duration::from_secs(30)).success());
    assert_eq!(
        w.sql("SELECT agent_state, status_text, status FROM threads WHERE path = '/k'")[0],
        vec![
            json!("stopped"),
            json!("Stopped; session retained"),
            json!("closed")
        ]
    );

    // A forked main session (another session id) gets a fresh registry.
    let mut fork = w.serve("quick", vec!["--session-id".into(), "ses_fork".into()], &[]);
    assert_eq!(call(&mut fork, "agent_status", json!({})), json!([]));
}

#[test]
fn independent_roots_start_empty_and_restore_is_all_or_nothing() {
    let w = world();
    let mut root = w.root("quick", &[]);
    let k = spawn(&mut root, "/k", "solo");
    assert_eq!(k["state"], "completed");
    assert_eq!(k["parent"], Value::Null);
    let kfile = PathBuf::from(k["sessionFile"].as_str().unwrap());
    assert_eq!(user_texts(&kfile), vec!["solo"]);
    assert_eq!(
        session_lines(&kfile)[0]["parentSession"],
        w.root_session.display().to_string()
    );
    // /k/l inherits /k (not /root).
    let l = spawn(&mut root, "/k/l", "sub");
    let lfile = PathBuf::from(l["sessionFile"].as_str().unwrap());
    assert_eq!(user_texts(&lfile), vec!["solo", "sub"]);
    assert_eq!(
        session_lines(&lfile)[0]["parentSession"],
        kfile.display().to_string()
    );
    drop(root);

    // A broken saved parent link: restore refuses the whole registry and changes nothing.
    let conn = rusqlite::Connection::open(&w.base.db).unwrap();
    conn.execute_batch(
        "PRAGMA foreign_keys = OFF;
         UPDATE threads SET agent_state = 'running', status = 'live', owner_pid = 999999999, owner_started_at = 1 WHERE path = '/k/l';
         UPDATE threads SET path = '/k2', task_name = 'k2' WHERE path = '/k';",
    )
    .unwrap();
    let before = w.sql("SELECT path, agent_state, status FROM threads ORDER BY path");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&w.base.db)
        .arg("restore")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("Missing saved parent /k of /k/l"),
        "{stderr}"
    );
    assert!(stderr.contains("Repair:"), "{stderr}");
    assert_eq!(
        w.sql("SELECT path, agent_state, status FROM threads ORDER BY path"),
        before
    );
    // The serve of that session refuses agent calls with the same reason.
    let mut root = w.root("quick", &[]);
    refused(
        &mut root,
        "agent_status",
        json!({}),
        Some("internal"),
        Has("Missing saved parent /k of /k/l"),
    );
}

#[test]
fn a_grandchild_whose_serve_died_is_resumed_by_the_root() {
    let w = world();
    let mut root = w.root("slow", &[]);
    spawn_detached(&mut root, "a", "lead");
    let mut a = w.child("/root/a", "slow");
    spawn_detached(&mut a, "b", "dig");
    // /root/a's serve dies without a trace while /root/a/b works; b's row still claims a live
    // process.
    assert_eq!(
        call(&mut root, "agent_status", json!({"path": "/root/a/b"}))["state"],
        "running"
    );
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    // A wait does not hang on a thread nobody runs any more: it comes back paused.
    let v = call(&mut root, "agent_wait", json!({"path": "/root/a/b"}));
    assert_eq!(v["state"], "paused", "{v}");
    assert_eq!(v["status"], "Interrupted by reload; send input to resume");
    let v = call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a/b", "message": "carry on"}),
    );
    assert!(
        matches!(
            v["state"].as_str(),
            Some("starting" | "running" | "completed")
        ),
        "{v}"
    );
    let v = call(&mut root, "agent_wait", json!({"path": "/root/a/b"}));
    assert_eq!(v["state"], "completed", "{v}");
    assert_eq!(v["output"], "slow answer to carry on");
    let texts = user_texts(Path::new(v["sessionFile"].as_str().unwrap()));
    assert_eq!(
        texts.iter().filter(|t| *t == "carry on").count(),
        1,
        "{texts:?}"
    );
    call(&mut root, "agent_stop", json!({"path": "/root/a"}));
    drop(root);
    w.finish(15);
}

#[test]
fn sigterm_shuts_serve_down_like_stdin_eof() {
    let w = world();
    let mut root = w.root("slow", &[]);
    spawn_detached(&mut root, "a", "long");
    // What Pi's shutdown sends its process group.
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(root.child.id() as i32).unwrap(),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = root.close(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    assert_eq!(
        w.sql("SELECT agent_state, status FROM threads WHERE path = '/root/a'")[0],
        vec![json!("stopped"), json!("closed")]
    );
    w.finish(10);
}

#[test]
fn stdin_eof_answers_every_request_already_read() {
    let w = world();
    w.base.script(
        "glacial",
        &json!({"turns": [{"steps": [{"delay_ms": 60000}, {"text": "late"}]}]}).to_string(),
    );
    // A fresh database: the first requests race the migrations, then stdin closes at once.
    let mut root = w.root("slow", &[]);
    let mut ids: Vec<u64> = (0..20)
        .map(|_| root.send("agent_status", json!({})))
        .collect();
    ids.push(root.send(
        "agent_spawn",
        json!({"path": "a", "type": "worker", "task": "lead", "wait": false}),
    ));
    let status = root.close(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    for id in &ids {
        let r = root.response(*id, Duration::from_secs(1));
        assert!(r.get("error").is_none(), "request {id}: {r}");
        assert_eq!(root.answer_count(*id), 1, "request {id}");
    }
    assert_eq!(
        w.sql("SELECT agent_state FROM threads WHERE path = '/root/a'")[0][0],
        "stopped"
    );

    // A wait on this serve's own child settles when shutdown stops the child.
    let mut root = w.root("slow", &[]);
    call(
        &mut root,
        "agent_steer",
        json!({"path": "a", "message": "go on"}),
    );
    let wait = root.send("agent_wait", json!({"path": "a"}));
    std::thread::sleep(Duration::from_millis(200));
    let status = root.close(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    let r = root.response(wait, Duration::from_secs(1));
    assert_eq!(r["result"]["details"]["state"], "stopped", "{r}");
    assert_eq!(root.answer_count(wait), 1);

    // A wait that shutdown cannot settle (the thread is another serve's) is cancelled after the
    // grace period, with an answer that says so.
    let mut root = w.root("slow", &[]);
    call(
        &mut root,
        "agent_steer",
        json!({"path": "a", "message": "go on"}),
    );
    let mut a = w.child("/root/a", "glacial");
    spawn_detached(&mut a, "b", "dig");
    let wait = root.send("agent_wait", json!({"path": "/root/a/b"}));
    std::thread::sleep(Duration::from_millis(300));
    let closed_at = Instant::now();
    let status = root.close(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    let took = closed_at.elapsed();
    let r = root.response(wait, Duration::from_secs(1));
    assert_eq!(r["error"]["code"], "closed", "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("cancelled") && message.contains("Repair:"),
        "{message}"
    );
    assert_eq!(root.answer_count(wait), 1);
    assert!(
        took >= Duration::from_secs(5) && took < Duration::from_secs(20),
        "cancelled after the grace period: {took:?}"
    );
    a.close(Duration::from_secs(30));
    w.finish(10);
}

#[test]
fn a_resume_runs_where_the_settled_process_still_lives() {
    let w = world();
    w.base.script(
        "glacial",
        &json!({"turns": [{"steps": [{"delay_ms": 60000}, {"text": "late"}]}]}).to_string(),
    );
    let mut root = w.root("quick", &[]);
    spawn_detached(&mut root, "a", "lead");
    // /root/a's serve holds /root/a/b; /root/a/b's serve holds /root/a/b/c, which keeps working.
    let mut a = w.child("/root/a", "slow");
    spawn_detached(&mut a, "b", "dig");
    let mut b_serve = w.serve(
        "glacial",
        vec![
            "--session-id".into(),
            "ses_child_b".into(),
            "--scope-path".into(),
            "/root/a/b".into(),
        ],
        &[
            ("PI_THREADS_ROOT_SESSION_ID", ROOT_SESSION),
            ("PI_SUBAGENTS_MAX_LEVELS", "4"),
        ],
    );
    spawn_detached(&mut b_serve, "c", "deeper");
    let b = call(
        &mut root,
        "agent_wait",
        json!({"path": "/root/a/b", "timeoutMs": 30000}),
    );
    assert_eq!(b["state"], "completed", "{b}");
    let before = &w.sql("SELECT status, launch_seq, pid FROM threads WHERE path = '/root/a/b'")[0];
    assert_eq!(before[0], "live", "b's process hosts working /root/a/b/c");

    // The root resumes b: the serve holding b's process runs it, in that same process.
    let v = call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a/b", "message": "one more thing"}),
    );
    assert!(
        v["state"] == "starting" || v["state"] == "running" || v["state"] == "completed",
        "{v}"
    );
    let b = call(
        &mut root,
        "agent_wait",
        json!({"path": "/root/a/b", "timeoutMs": 30000}),
    );
    assert_eq!(b["state"], "completed", "{b}");
    assert_ne!(b["output"], "slow answer to dig", "a new run answered: {b}");
    let after = &w.sql("SELECT status, launch_seq, pid FROM threads WHERE path = '/root/a/b'")[0];
    assert_eq!(after, before, "the same process ran the resume");
    let owner: Vec<Value> =
        w.sql("SELECT owner_pid FROM threads WHERE path = '/root/a/b'")[0].clone();
    assert_eq!(
        owner[0],
        json!(a.child.id()),
        "still held by /root/a's serve"
    );

    call(&mut root, "agent_stop", json!({"path": "/root/a"}));
    for s in [&mut b_serve, &mut a, &mut root] {
        assert!(s.close(Duration::from_secs(30)).success());
    }
    w.finish(10);
}

#[test]
fn a_resume_waits_for_another_serve_to_retire_the_previous_process() {
    let w = world();
    // b ignores SIGTERM, so retiring its idle process takes the full stop escalation (about
    // 1.5 s until SIGKILL): the root's resume certainly arrives while it still lives.
    let stubborn = json!({"ignore_sigterm": true, "turns": [{"steps": [{"delay_ms": 100}, {"text": "answer to {prompt}"}]}]});
    w.base.script("stubborn", &stubborn.to_string());
    let mut root = w.root("quick", &[]);
    spawn_detached(&mut root, "a", "lead");
    let mut a = w.child("/root/a", "stubborn");
    let b = call(
        &mut a,
        "agent_spawn",
        json!({"path": "b", "type": "worker", "task": "dig", "wait": true}),
    );
    assert_eq!(b["state"], "completed", "{b}");
    // /root/a's serve is now retiring b's idle process; the root resumes b at once.
    let old = w.sql("SELECT status, pid FROM threads WHERE path = '/root/a/b'")[0].clone();
    assert_eq!(old[0], "live", "the old process is still being retired");
    call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a/b", "message": "one more thing"}),
    );
    assert!(
        !Path::new(&format!("/proc/{}", old[1])).exists(),
        "the resume started only after the previous process {} was gone",
        old[1]
    );
    let b = call(
        &mut root,
        "agent_wait",
        json!({"path": "/root/a/b", "timeoutMs": 30000}),
    );
    assert_eq!(b["state"], "completed", "{b}");
    assert_eq!(
        b["output"], "answer to one more thing",
        "a fresh process: {b}"
    );
    let now =
        w.sql("SELECT owner_pid, pid, launch_seq FROM threads WHERE path = '/root/a/b'")[0].clone();
    assert_eq!(
        now[0],
        json!(root.child.id()),
        "the root's serve ran the resume"
    );
    assert_ne!(now[1], old[1], "a new process, {old:?} → {now:?}");
    assert_eq!(now[2], 2);
    // Every message once in b's one session file.
    let texts = user_texts(Path::new(b["sessionFile"].as_str().unwrap()));
    assert_eq!(
        texts
            .iter()
            .filter(|t| t.contains("one more thing"))
            .count(),
        1,
        "{texts:?}"
    );
    for s in [&mut a, &mut root] {
        assert!(s.close(Duration::from_secs(30)).success());
    }
    w.finish(10);
}

/// The golden case of the original's `tests/startup.test.ts`: a detached nested spawn answers
/// `starting`; stopping its settled parent stops the parent itself and the working child; the
/// stopped parent may not spawn. Here the parent has completed rather than been restored
/// paused: stop takes a thread in any state.
#[test]
fn golden_stop_takes_a_settled_parent_and_its_starting_child() {
    let w = world();
    let mut root = w.root("quick", &[]);
    let worker = spawn(&mut root, "worker", "work");
    assert_eq!(worker["state"], "completed");
    drop(root);
    let mut root = w.root("slow", &[]);
    let child = spawn_detached(&mut root, "worker/child", "nested");
    assert_eq!(child["state"], "starting", "{child}");
    assert_eq!(child["status"], "Starting");
    assert_eq!(child["owner"], "/root/worker");
    let stopped = call(&mut root, "agent_stop", json!({"path": "worker"}));
    assert_eq!(stopped["state"], "stopped", "{stopped}");
    assert_eq!(stopped["status"], "Stopped; session retained");
    assert!(stopped.get("output").is_none(), "output removed: {stopped}");
    // The completed parent was not running, so it has no aborted run's error.
    assert!(stopped.get("error").is_none(), "{stopped}");
    let child = call(
        &mut root,
        "agent_status",
        json!({"path": "/root/worker/child"}),
    );
    assert_eq!(child["state"], "stopped", "{child}");
    assert_eq!(child["error"], "Subagent run aborted");
    // The stopped parent's own serve may not spawn ("working agent").
    let mut worker_serve = w.child("/root/worker", "quick");
    refused(
        &mut worker_serve,
        "agent_spawn",
        json!({"path": "late", "type": "worker", "task": "late"}),
        Some("forbidden"),
        Starts("Only a working agent may spawn children. Repair:"),
    );
    // Nor may the root spawn or steer beneath it until it is resumed.
    refused(
        &mut root,
        "agent_spawn",
        json!({"path": "/root/worker/late", "type": "worker", "task": "late", "wait": false}),
        Some("conflict"),
        Starts("Cannot continue under stopped ancestor /root/worker; resume it first. Repair:"),
    );
    refused(
        &mut root,
        "agent_steer",
        json!({"path": "/root/worker/child", "message": "go on"}),
        Some("conflict"),
        Any,
    );
    drop(worker_serve);
    drop(root);
    w.finish(15);
}

/// Stop in any state: a paused thread and a failed one become stopped (the failed one keeps
/// its error); after a resume, spawning beneath works again.
#[test]
fn stop_takes_paused_and_failed_threads_and_a_resume_lifts_it() {
    let w = world();
    let mut failing = w.root("failing", &[]);
    let f = spawn(&mut failing, "f", "try");
    assert_eq!(f["state"], "failed", "{f}");
    let error = f["error"].as_str().unwrap().to_string();
    let v = call(&mut failing, "agent_stop", json!({"path": "f"}));
    assert_eq!(v["state"], "stopped", "{v}");
    assert_eq!(v["status"], "Stopped; session retained");
    assert_eq!(v["error"], error.as_str(), "{v}");
    drop(failing);

    let mut root = w.root("slow", &[]);
    spawn_detached(&mut root, "p", "lead");
    let mut p = w.child("/root/p", "slow");
    call(&mut p, "agent_pause", json!({"reason": "need input"}));
    let v = call(&mut root, "agent_wait", json!({"path": "/root/p"}));
    assert_eq!(v["state"], "paused", "{v}");
    let v = call(&mut root, "agent_stop", json!({"path": "/root/p"}));
    assert_eq!(v["state"], "stopped", "{v}");
    assert_eq!(v["status"], "Stopped; session retained");
    assert_eq!(
        w.sql("SELECT agent_state FROM threads WHERE path = '/root/p'")[0][0],
        "stopped"
    );
    refused(
        &mut root,
        "agent_spawn",
        json!({"path": "/root/p/x", "type": "worker", "task": "t", "wait": false}),
        Some("conflict"),
        Any,
    );
    // Resuming the stopped thread lifts the refusal.
    let v = call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/p", "message": "carry on"}),
    );
    assert_eq!(v["state"], "starting", "{v}");
    let x = spawn_detached(&mut root, "/root/p/x", "t");
    assert_eq!(x["state"], "starting", "{x}");
    call(&mut root, "agent_stop", json!({"path": "/root/p"}));
    drop(p);
    drop(root);
    w.finish(15);
}

/// The view's fields (owner, type, epoch-ms times), the failed and stopped values, the list in
/// spawn order, the root's pseudo-view, and notices that end as the original's.
#[test]
fn views_lists_and_notices_are_the_originals() {
    let w = world();
    let before = threadbase::time::now_ms();
    let mut root = w.root("quick", &[]);
    // Spawn order, not path order: b before a.
    let b = call(
        &mut root,
        "agent_spawn",
        json!({"path": "b", "type": "reviewer", "task": "review"}),
    );
    assert_eq!(b["type"], "reviewer");
    assert_eq!(b["owner"], "/root");
    let created = b["createdAt"].as_i64().expect("createdAt is a number");
    let updated = b["updatedAt"].as_i64().expect("updatedAt is a number");
    let after = threadbase::time::now_ms();
    assert!(
        before <= created && created <= updated && updated <= after,
        "{b}"
    );
    let keys: Vec<&str> = b.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "path",
            "parent",
            "owner",
            "type",
            "state",
            "task",
            "status",
            "output",
            "createdAt",
            "updatedAt",
            "sessionFile",
            "inputTokens",
            "outputTokens",
            "costUsd",
            "costId"
        ],
        "{b}"
    );
    spawn(&mut root, "a", "work");
    let k = spawn(&mut root, "/k", "solo");
    assert_eq!((&k["parent"], &k["owner"]), (&Value::Null, &json!("/root")));
    // Retiring a settled child's process touches its row (and so `updatedAt`): wait for all
    // three, so that the two lists below read the same rows.
    wait_for("processes retired", Duration::from_secs(10), || {
        w.sql("SELECT count(*) FROM threads WHERE status = 'live'")[0][0] == json!(0)
    });
    let list = call(&mut root, "agent_status", json!({}));
    let paths: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/root/b", "/root/a", "/k"]);
    // An empty path lists too, as the original's `params.path ? get : list` does.
    assert_eq!(call(&mut root, "agent_status", json!({"path": ""})), list);
    // /root from the root: the original's pseudo-view of the main session.
    let main = call(&mut root, "agent_status", json!({"path": "/root"}));
    let now = main["updatedAt"].as_i64().unwrap();
    assert!(now >= after, "{main}");
    assert_eq!(
        main,
        json!({"path": "/root", "parent": null, "owner": "/root", "type": "main",
               "state": "running", "task": "Main Pi session", "status": "main",
               "createdAt": 0, "updatedAt": now})
    );
    assert_eq!(
        call(&mut root, "agent_output", json!({"path": "/root"})),
        json!({"path": "/root", "text": "", "totalCharacters": 0, "nextOffset": null})
    );
    drop(root);

    // A failed thread's status is its error; its notice ends "Session retained …".
    let mut failing = w.root("failing", &[]);
    let f = spawn_detached(&mut failing, "f", "try");
    assert_eq!(f["state"], "starting", "{f}");
    wait_for("failed notice", Duration::from_secs(10), || {
        notices(&failing).iter().any(|n| n["path"] == "/root/f")
    });
    let f = call(&mut failing, "agent_status", json!({"path": "f"}));
    assert_eq!(f["state"], "failed", "{f}");
    let error = f["error"].as_str().unwrap();
    assert!(error.contains("model exploded"), "{f}");
    assert_eq!(f["status"], error);
    let n = notices(&failing);
    assert_eq!(
        n[0]["text"],
        format!("Agent /root/f is failed: {error}. Session retained for further input.")
    );
    drop(failing);

    // A stopped run keeps the aborted run's error.
    let mut slow = w.root("slow", &[]);
    spawn_detached(&mut slow, "s", "long");
    let s = call(&mut slow, "agent_stop", json!({"path": "s"}));
    assert_eq!(s["state"], "stopped", "{s}");
    assert_eq!(s["status"], "Stopped; session retained");
    assert_eq!(s["error"], "Subagent run aborted");
    drop(slow);
    w.finish(15);
}

/// The original's error texts, word for word, each followed by threadbase's ` Repair: …`.
#[test]
fn error_texts_are_the_originals() {
    let w = world();
    let mut root = w.root("quick", &[]);
    let unknown = Some("unknown_reference");
    let invalid = Some("invalid_params");
    refused_all(
        &mut root,
        vec![
            (
                "agent_status",
                json!({"path": "nope"}),
                unknown,
                Starts("Unknown thread /root/nope. Repair:"),
            ),
            (
                "agent_wait",
                json!({"path": "/root/nope"}),
                None,
                Starts("Unknown thread /root/nope. Repair:"),
            ),
            (
                "agent_output",
                json!({"path": "/k"}),
                None,
                Starts("Unknown thread /k. Repair:"),
            ),
            (
                "agent_spawn",
                json!({"path": "/root/x/y", "type": "worker", "task": "t"}),
                unknown,
                Starts("Unknown thread /root/x. Repair:"),
            ),
            (
                "agent_spawn",
                json!({"path": "x", "task": "t"}),
                invalid,
                Has("type is required"),
            ),
            (
                "agent_spawn",
                json!({"path": "x", "type": "worker", "task": " \n"}),
                None,
                Starts("Task must not be empty. Repair:"),
            ),
        ],
    );
    spawn(&mut root, "done", "t");
    let not_mine = Starts(
        "/root may address only its descendants (not siblings, unrelated trees or ancestors). Repair:",
    );
    let forbidden = Some("forbidden");
    refused_all(
        &mut root,
        vec![
            (
                "agent_steer",
                json!({"path": "done", "message": "  "}),
                invalid,
                Starts("Steering message must not be empty. Repair:"),
            ),
            ("agent_wait", json!({"path": "/root"}), forbidden, not_mine),
            ("agent_stop", json!({"path": "/root"}), forbidden, not_mine),
            (
                "agent_steer",
                json!({"path": "/root", "message": "hi"}),
                forbidden,
                not_mine,
            ),
            (
                "agent_update",
                json!({"message": "hi"}),
                None,
                Starts("Unknown thread /root. Repair:"),
            ),
            (
                "agent_pause",
                json!({"reason": "why"}),
                None,
                Starts("Unknown thread /root. Repair:"),
            ),
        ],
    );
    // A child that is not working may neither report progress nor pause.
    let mut done = w.child("/root/done", "quick");
    refused(
        &mut done,
        "agent_update",
        json!({"message": "hi"}),
        Some("forbidden"),
        Starts("Only a working child may report progress. Repair:"),
    );
    refused(
        &mut done,
        "agent_pause",
        json!({"reason": "why"}),
        None,
        Starts("Only a working child may pause itself. Repair:"),
    );
    // A serve whose agent path is not in the registry.
    let mut stranger = w.child("/root/ghost", "quick");
    refused(
        &mut stranger,
        "agent_update",
        json!({"message": "hi"}),
        None,
        Starts("Unknown thread /root/ghost. Repair:"),
    );
    drop((done, stranger));
    drop(root);
    w.finish(15);
}
