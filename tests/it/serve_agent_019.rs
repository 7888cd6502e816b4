//! Contract B's 0.19 additions (issue 29) through real `threadbase serve` processes with
//! scripted children: the view's new fields, report-only timeouts, reap, per-type models, tools
//! and extensions, and the final recap. The world and helpers are `serve_agent`'s.

use std::time::Duration;

use serde_json::{json, Value};

use crate::serve_agent::{call, fail, notices, spawn, spawn_detached, wait_for, world};

/// The view carries 0.19's fields after the tokens (`model`, `thinkingLevel`, `costUsd`,
/// `costId`), `costId` is the thread's own id, and a cut output ends with `outputTruncated`.
#[test]
fn the_view_has_the_019_fields_and_compact_cuts_output_at_16000() {
    let w = world();
    let mut root = w.root("quick", &[]);
    let long_task = "x".repeat(16_100);
    let v = spawn(&mut root, "long", &long_task);
    assert_eq!(v["state"], "completed");
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
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
            "costId",
            "outputTruncated"
        ],
        "{v}"
    );
    assert_eq!(v["outputTruncated"], true);
    assert_eq!(v["output"].as_str().unwrap().chars().count(), 16_000);
    let id = &w.sql("SELECT id FROM threads WHERE path = '/root/long'")[0][0];
    assert_eq!(&v["costId"], id);
    // agent_output still pages the whole answer.
    let page = call(
        &mut root,
        "agent_output",
        json!({"path": "long", "offset": 16_000}),
    );
    assert_eq!(page["totalCharacters"], 16_110);
    // A short answer is not cut and has no outputTruncated.
    let v = spawn(&mut root, "short", "y");
    assert!(v.get("outputTruncated").is_none(), "{v}");
    assert_eq!(v["output"], "answer to y");
    drop(root);
    w.finish(10);
}

/// A child that says two things (each with a tool call), then works for a while and answers.
fn talker(w: &crate::serve_agent::World) {
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

/// `timeoutMs` on agent_spawn arms one report-only timer: when it passes while the child
/// works, the parent gets one `timeout` notice with the child's recent output and the child
/// keeps working to its answer. (`THREADBASE_TEST_TIMEOUT_DIVISOR=100`: 30 s fire after 300 ms.)
#[test]
fn a_spawn_timeout_reports_once_and_never_stops_the_child() {
    let w = world();
    talker(&w);
    let mut root = w.root("talker", &[("THREADBASE_TEST_TIMEOUT_DIVISOR", "100")]);
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "slow", "type": "worker", "task": "t", "wait": false, "timeoutMs": 30000}),
    );
    assert_eq!(v["state"], "starting");
    wait_for("the timeout notice", Duration::from_secs(10), || {
        notices(&root).iter().any(|n| n["kind"] == "timeout")
    });
    let n = notices(&root);
    let t = n.iter().find(|n| n["kind"] == "timeout").unwrap();
    assert_eq!(t["path"], "/root/slow");
    assert_eq!(t["recipient"], "/root");
    assert_eq!(t["timeoutMs"], 30000);
    assert_eq!(t["recentOutput"], "looking at A\n---\nlooking at B");
    assert!(
        t["text"]
            .as_str()
            .unwrap()
            .starts_with("Agent /root/slow is still running after its timeout of 30000 ms"),
        "{t}"
    );
    // It did not stop the child, and the row's timer is spent.
    let st = call(&mut root, "agent_status", json!({"path": "slow"}));
    assert_eq!(st["state"], "running", "{st}");
    assert_eq!(
        w.sql("SELECT agent_timeout_at, agent_timeout_ms FROM threads WHERE path = '/root/slow'"),
        vec![vec![Value::Null, Value::Null]]
    );
    let v = call(&mut root, "agent_wait", json!({"path": "slow"}));
    assert_eq!(v["output"], "final answer");
    std::thread::sleep(Duration::from_millis(300));
    let timeouts = notices(&root)
        .iter()
        .filter(|n| n["kind"] == "timeout")
        .count();
    assert_eq!(timeouts, 1, "{:?}", notices(&root));
    drop(root);
    w.finish(10);
}

/// agent_steer with `timeoutMs` alone re-arms the timer from now (replacing the pending one);
/// stop clears it; the 0.19 rules for steer without anything and of a thread that is not
/// working answer with the original's texts.
#[test]
fn steer_rearms_the_timer_and_stop_clears_it() {
    let w = world();
    talker(&w);
    let mut root = w.root("talker", &[("THREADBASE_TEST_TIMEOUT_DIVISOR", "100")]);
    // 300,000 ms / 100: 3 s, longer than the child works (2.5 s).
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "a", "type": "worker", "task": "t", "wait": false, "timeoutMs": 300000}),
    );
    assert_eq!(v["state"], "starting");
    let armed = &w.sql("SELECT agent_timeout_ms FROM threads WHERE path = '/root/a'")[0][0];
    assert_eq!(armed, 300000);
    let v = call(
        &mut root,
        "agent_steer",
        json!({"path": "a", "timeoutMs": 30000}),
    );
    assert_eq!(v["path"], "/root/a");
    assert_eq!(
        w.sql("SELECT agent_timeout_ms FROM threads WHERE path = '/root/a'")[0][0],
        30000
    );
    wait_for("the re-armed timeout", Duration::from_secs(10), || {
        notices(&root).iter().any(|n| n["kind"] == "timeout")
    });
    let t = notices(&root)
        .into_iter()
        .find(|n| n["kind"] == "timeout")
        .unwrap();
    assert_eq!(t["timeoutMs"], 30000);
    // Stop clears a pending timer: no notice for b.
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "b", "type": "worker", "task": "t", "wait": false, "timeoutMs": 30000}),
    );
    assert_eq!(v["state"], "starting");
    let v = call(&mut root, "agent_stop", json!({"path": "b"}));
    assert_eq!(v["state"], "stopped");
    assert_eq!(
        w.sql("SELECT agent_timeout_at FROM threads WHERE path = '/root/b'")[0][0],
        Value::Null
    );
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        !notices(&root)
            .iter()
            .any(|n| n["kind"] == "timeout" && n["path"] == "/root/b"),
        "{:?}",
        notices(&root)
    );
    // The original's texts.
    let (code, m) = fail(&mut root, "agent_steer", json!({"path": "b"}));
    assert_eq!(code, "invalid_params");
    assert!(
        m.starts_with("Provide message, timeoutMs, or both. Repair:"),
        "{m}"
    );
    let (code, m) = fail(
        &mut root,
        "agent_steer",
        json!({"path": "b", "timeoutMs": 30000}),
    );
    assert_eq!(code, "conflict");
    assert!(
        m.starts_with("Only a working agent has a timeout to extend. Repair:"),
        "{m}"
    );
    for bad in [json!(29999), json!(300001), json!(60000.5), json!("60000")] {
        let (code, m) = fail(
            &mut root,
            "agent_spawn",
            json!({"path": "c", "type": "worker", "task": "t", "timeoutMs": bad}),
        );
        assert_eq!(code, "invalid_params");
        assert!(
            m.starts_with(
                "timeoutMs must be an integer between 30000 (30s) and 300000 (5min). Repair:"
            ),
            "{m}"
        );
        let (_, m) = fail(
            &mut root,
            "agent_steer",
            json!({"path": "b", "message": "x", "timeoutMs": bad}),
        );
        assert!(
            m.starts_with(
                "timeoutMs must be an integer between 30000 (30s) and 300000 (5min). Repair:"
            ),
            "{m}"
        );
    }
    call(&mut root, "agent_wait", json!({"path": "a"}));
    drop(root);
    w.finish(10);
}

fn threadbase(db: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `/agents reap` (serve's `agents.reap`) forgets completed threads with no descendant that
/// stays, oldest first: they leave agent_status, free their slot of the total limit and cannot
/// be resumed, while their rows (marked reaped), usage and session files stay. A completed
/// parent of a failed child stays, and so does the child. `threadbase reap [--dry-run]` does
/// the same from a shell.
#[test]
fn reap_forgets_completed_leaves_frees_slots_and_keeps_rows() {
    let w = world();
    let mut root = w.root("slow", &[("PI_SUBAGENTS_MAX_THREADS", "4")]);
    // /root/p works while its own serve spawns /root/p/q, which fails; then p completes.
    spawn_detached(&mut root, "p", "lead");
    let mut p = w.child("/root/p", "failing");
    let q = spawn(&mut p, "q", "dig");
    assert_eq!(q["state"], "failed");
    let v = call(&mut root, "agent_wait", json!({"path": "p"}));
    assert_eq!(v["state"], "completed");
    drop(p);
    let mut quick = w.root("quick", &[("PI_SUBAGENTS_MAX_THREADS", "4")]);
    let done1 = spawn(&mut quick, "done1", "one");
    let done2 = spawn(&mut quick, "done2", "two");
    assert_eq!(
        (&done1["state"], &done2["state"]),
        (&json!("completed"), &json!("completed"))
    );
    let file = done1["sessionFile"].as_str().unwrap().to_string();
    let (code, m) = fail(
        &mut quick,
        "agent_spawn",
        json!({"path": "x", "type": "worker", "task": "t"}),
    );
    assert_eq!(code, "limit");
    assert!(m.starts_with("Total thread limit reached."), "{m}");

    // Dry run: counts, changes nothing.
    let dry = call(&mut quick, "agents.reap", json!({"dryRun": true}));
    assert_eq!(
        dry,
        json!({"dryRun": true, "count": 2, "threads": ["/root/done1", "/root/done2"]})
    );
    let (ok, out, err) = threadbase(&w.base.db, &["reap", "--dry-run", "--json"]);
    assert!(ok, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["count"], 2, "{doc}");
    assert_eq!(doc["threads"][0]["path"], "/root/done1");
    assert_eq!(
        w.sql("SELECT count(*) FROM threads WHERE agent_reaped_at IS NOT NULL")[0][0],
        0
    );
    let reaped = call(&mut quick, "agents.reap", json!({}));
    assert_eq!(reaped["count"], 2, "{reaped}");
    // Forgotten: not listed, unknown, not resumable, the path stays taken.
    let all = call(&mut quick, "agent_status", json!({}));
    let paths: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/root/p", "/root/p/q"]);
    for (method, params) in [
        ("agent_status", json!({"path": "done1"})),
        ("agent_steer", json!({"path": "done1", "message": "again"})),
        ("agent_wait", json!({"path": "done1"})),
        ("agent_output", json!({"path": "done1"})),
    ] {
        let (code, m) = fail(&mut quick, method, params);
        assert_eq!(code, "unknown_reference", "{method}: {m}");
        assert!(m.starts_with("Unknown thread /root/done1. Repair:"), "{m}");
        assert!(m.contains("was reaped"), "{m}");
    }
    let (code, m) = fail(
        &mut quick,
        "agent_spawn",
        json!({"path": "done1", "type": "worker", "task": "t"}),
    );
    assert_eq!(code, "conflict");
    assert!(m.contains("was reaped"), "{m}");
    // Its slot is free.
    let x = spawn(&mut quick, "x", "t");
    assert_eq!(x["state"], "completed");
    // The rows, usage and session file stay.
    assert_eq!(
        w.sql(
            "SELECT t.path, t.agent_state, u.thread_id IS NOT NULL FROM threads t
             LEFT JOIN thread_usage u ON u.thread_id = t.id
             WHERE t.agent_reaped_at IS NOT NULL ORDER BY t.rowid"
        ),
        vec![
            vec![json!("/root/done1"), json!("completed"), json!(1)],
            vec![json!("/root/done2"), json!("completed"), json!(1)]
        ]
    );
    assert!(std::path::Path::new(&file).exists());
    // The shell command reaps what is left that may go: /root/x (p stays above failed q).
    let (ok, out, err) = threadbase(&w.base.db, &["reap"]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with("reaped 1 completed thread\n  /root/x  (session ses_main)"),
        "{out}"
    );
    let (ok, out, _) = threadbase(&w.base.db, &["reap", "--dry-run"]);
    assert!(ok);
    assert_eq!(out, "would reap 0 completed threads\n");
    // Only the main session reaps.
    let mut q_serve = w.child("/root/p/q", "quick");
    let (code, _) = fail(&mut q_serve, "agents.reap", json!({}));
    assert_eq!(code, "forbidden");
    drop(q_serve);
    drop(quick);
    drop(root);
    w.finish(10);
}

/// Writes the global settings file of the world's serves (`<root>/agent/threadbase-agents.json`).
fn settings(w: &crate::serve_agent::World, doc: &Value) {
    let dir = w.base.root.join("agent");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("threadbase-agents.json"), doc.to_string()).unwrap();
}

/// A script whose Pi lists two models with credentials (`fake/m1`, and `fake/think`, which
/// reasons) and whose runs take a while.
fn typed_script(w: &crate::serve_agent::World) {
    w.base.script(
        "typed",
        &json!({
            "list_models": [
                {"provider": "fake", "id": "m1"},
                {"provider": "fake", "id": "think", "reasoning": true}
            ],
            "turns": [{"steps": [{"delay_ms": 1200}, {"text": "typed answer"}]}]
        })
        .to_string(),
    );
}

/// The command line of the live child whose session is named `name`.
fn child_cmdline(w: &crate::serve_agent::World, name: &str) -> Vec<String> {
    let mut found = Vec::new();
    wait_for("the child's process", Duration::from_secs(10), || {
        for pid in w.base.leftovers() {
            let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let argv: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if argv.windows(2).any(|p| p[0] == "--name" && p[1] == name) {
                found = argv;
                return true;
            }
        }
        false
    });
    found
}

fn after<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    argv.iter()
        .position(|a| a == flag)
        .and_then(|i| argv.get(i + 1))
        .map(String::as_str)
}

/// A type's models are tried in order and the first with credentials (`--list-models`) is
/// taken; its thinking level is clamped to what the model supports; `toolFiltering: allowed`
/// gives the type's allow list minus its block list; the child is launched with Pi's own
/// flags and `-e` for each required extension, and its row and view record the choice.
/// A type whose models are all unavailable fails the spawn with a clear error naming them.
#[test]
fn agent_types_choose_model_thinking_tools_and_extensions() {
    let w = world();
    typed_script(&w);
    let ext = w.base.root.join("ext").join("required.ts");
    std::fs::create_dir_all(ext.parent().unwrap()).unwrap();
    std::fs::write(&ext, "export default function () {}\n").unwrap();
    settings(
        &w,
        &json!({
            "modelSelection": "pick-first-available",
            "requiredChildExtensions": [ext.display().to_string()],
            "agentTypes": {
                "reviewer": {"models": ["nokey/x", "fake/think"], "thinkingLevel": "high",
                             "tools": {"allow": ["read", "bash"], "block": ["bash"]}},
                "plain": {"model": "fake/m1", "thinkingLevel": "high"},
                "broken": {"models": ["nokey/x", "other/y"]}
            }
        }),
    );
    let mut root = w.root("typed", &[]);
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "r", "type": "reviewer", "task": "review", "wait": false}),
    );
    assert_eq!(
        (&v["model"], &v["thinkingLevel"]),
        (&json!("fake/think"), &json!("high")),
        "{v}"
    );
    let argv = child_cmdline(&w, "reviewer /root/r");
    assert_eq!(after(&argv, "--provider"), Some("fake"), "{argv:?}");
    assert_eq!(after(&argv, "--model"), Some("think"), "{argv:?}");
    assert_eq!(after(&argv, "--thinking"), Some("high"), "{argv:?}");
    assert_eq!(after(&argv, "--tools"), Some("read"), "{argv:?}");
    assert_eq!(
        after(&argv, "--extension"),
        Some(ext.to_str().unwrap()),
        "{argv:?}"
    );
    let v = call(&mut root, "agent_wait", json!({"path": "r"}));
    assert_eq!(v["output"], "typed answer");
    // The child's own session records the model it ran with and its thinking level.
    let lines =
        crate::serve_agent::session_lines(std::path::Path::new(v["sessionFile"].as_str().unwrap()));
    assert!(
        lines.iter().any(|e| e["message"]["role"] == "assistant"
            && e["message"]["provider"] == "fake"
            && e["message"]["model"] == "think"),
        "{lines:?}"
    );
    assert!(lines
        .iter()
        .any(|e| e["type"] == "thinking_level_change" && e["thinkingLevel"] == "high"));
    assert_eq!(
        w.sql(
            "SELECT agent_model, agent_thinking, agent_tools FROM threads WHERE path = '/root/r'"
        ),
        vec![vec![
            json!("fake/think"),
            json!("high"),
            json!(r#"{"filtering":"allowed","tools":["read"]}"#)
        ]]
    );
    // m1 does not reason: its thinking level is clamped to off; no allow list: no tools.
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "p", "type": "plain", "task": "t"}),
    );
    assert_eq!(
        (&v["model"], &v["thinkingLevel"]),
        (&json!("fake/m1"), &json!("off")),
        "{v}"
    );
    assert_eq!(
        w.sql("SELECT agent_tools FROM threads WHERE path = '/root/p'")[0][0],
        json!(r#"{"filtering":"allowed","tools":[]}"#)
    );
    // No listed model has credentials: the spawn fails, nothing is reserved.
    let (code, m) = fail(
        &mut root,
        "agent_spawn",
        json!({"path": "b", "type": "broken", "task": "t"}),
    );
    assert_eq!(code, "invalid_params");
    assert!(
        m.starts_with("No model of [nokey/x, other/y] is available"),
        "{m}"
    );
    assert!(w
        .sql("SELECT id FROM threads WHERE path = '/root/b'")
        .is_empty());
    // A type the settings do not define runs as before: the parent's flags, nothing recorded.
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "u", "type": "worker", "task": "t"}),
    );
    assert!(
        v.get("model").is_none() && v.get("thinkingLevel").is_none(),
        "{v}"
    );
    drop(root);
    w.finish(10);
}

/// pick-first-scoped (the default) takes the first listed model in the main session's scope
/// (`--models`); use-current always takes the main session's model.
#[test]
fn scoped_and_current_model_selection() {
    let w = world();
    typed_script(&w);
    settings(
        &w,
        &json!({"agentTypes": {
            "scoped": {"models": ["fake/think", "fake/m1"]},
            "outside": {"models": ["fake/think"]}
        }}),
    );
    let args = r#"["--provider", "fake", "--model", "m1", "--models", "fake/m1"]"#;
    let mut root = w.root_with_args("typed", &[], args);
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "s", "type": "scoped", "task": "t"}),
    );
    assert_eq!(v["model"], "fake/m1", "{v}");
    let (_, m) = fail(
        &mut root,
        "agent_spawn",
        json!({"path": "o", "type": "outside", "task": "t"}),
    );
    assert!(m.starts_with("No model of [fake/think] is available: none has credentials (`pi --list-models`) and is in the main session's scoped models (--models)."), "{m}");
    drop(root);
    settings(
        &w,
        &json!({"modelSelection": "use-current", "agentTypes": {"outside": {"models": ["fake/think"]}}}),
    );
    let mut root = w.root_with_args("typed", &[], args);
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "c", "type": "outside", "task": "t"}),
    );
    assert_eq!(v["model"], "fake/m1", "{v}");
    drop(root);
    w.finish(10);
}

/// requiredChildExtensions: an entry that names nothing refuses every spawn until it is fixed;
/// a settings file with a bad value stops serve at its start with a Repair: hint.
#[test]
fn bad_extensions_refuse_spawns_and_bad_settings_stop_serve() {
    let w = world();
    settings(
        &w,
        &json!({"requiredChildExtensions": ["/nonexistent/ext.ts"]}),
    );
    let mut root = w.root("quick", &[]);
    let (code, m) = fail(
        &mut root,
        "agent_spawn",
        json!({"path": "a", "type": "worker", "task": "t"}),
    );
    assert_eq!(code, "invalid_params");
    assert!(
        m.starts_with("Invalid requiredChildExtensions entry /nonexistent/ext.ts: no such file or folder; subagents will not start until it is fixed. Repair:"),
        "{m}"
    );
    drop(root);
    settings(&w, &json!({"toolFiltering": "some"}));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&w.base.db)
        .args(["serve", "--cwd"])
        .arg(&w.base.root)
        .env("PI_CODING_AGENT_DIR", w.base.root.join("agent"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Invalid subagent settings in ")
            && err.contains(
                "toolFiltering must be allowed, all-except-blocked or all, got \"some\". Repair:"
            ),
        "{err}"
    );
    w.finish(10);
}

/// finalRecap: detached children's results are held back (pending mailbox rows) and delivered
/// as one notice when the last outstanding one has reported; a timeout notice still goes at
/// once; a blocking spawn's result is its tool result, never part of the recap.
#[test]
fn final_recap_holds_detached_results_until_the_last_one_reports() {
    let w = world();
    w.base.script(
        "staggered",
        &json!({"turns": [{"steps": [{"delay_ms": 600}, {"text": "answer to {prompt}"}]}]})
            .to_string(),
    );
    w.base.script(
        "later",
        &json!({"turns": [{"steps": [{"delay_ms": 1800}, {"text": "late answer to {prompt}"}]}]})
            .to_string(),
    );
    settings(&w, &json!({"finalRecap": true}));
    let env = [("THREADBASE_TEST_TIMEOUT_DIVISOR", "100")];
    let mut early = w.root("staggered", &env);
    let mut late = w.root("later", &env);
    spawn_detached(&mut early, "one", "first");
    call(
        &mut late,
        "agent_spawn",
        json!({"path": "two", "type": "worker", "task": "second", "wait": false, "timeoutMs": 30000}),
    );
    // "one" has settled, "two" still works: its result is held as a pending row.
    wait_for("one settled", Duration::from_secs(10), || {
        w.sql("SELECT agent_state FROM threads WHERE path = '/root/one'")[0][0] == "completed"
    });
    assert_eq!(
        w.sql(
            "SELECT mb.state, mb.recap_held FROM mailbox mb JOIN threads t ON t.id = mb.thread_id
             WHERE t.path = '/root/one' AND mb.direction = 'to_parent'"
        ),
        vec![vec![json!("pending"), json!(1)]]
    );
    // The timeout notice of "two" is not held.
    wait_for("the timeout notice", Duration::from_secs(10), || {
        notices(&early)
            .iter()
            .chain(notices(&late).iter())
            .any(|n| n["kind"] == "timeout")
    });
    let all = || {
        let mut n = notices(&early);
        n.extend(notices(&late));
        n
    };
    assert!(!all().iter().any(|n| n["kind"] == "notice"), "{:?}", all());
    // "two" reports: one recap carries both results, in order.
    wait_for("the recap", Duration::from_secs(10), || {
        all().iter().any(|n| n["kind"] == "recap")
    });
    std::thread::sleep(Duration::from_millis(300));
    let n = all();
    let recaps: Vec<&Value> = n.iter().filter(|n| n["kind"] == "recap").collect();
    assert_eq!(recaps.len(), 1, "{n:?}");
    assert_eq!(
        recaps[0]["text"],
        "All detached subagents have reported (2 results).\n\nAgent /root/one completed. Final answer:\nanswer to first\n\nAgent /root/two completed. Final answer:\nlate answer to second\n\nSummarize these results in one reply."
    );
    assert_eq!(recaps[0]["results"][1]["path"], "/root/two");
    assert!(!n.iter().any(|n| n["kind"] == "notice"), "{n:?}");
    // A blocking spawn's result is its tool result; nothing is held for it.
    let v = spawn(&mut early, "three", "third");
    assert_eq!(v["output"], "answer to third");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        w.sql("SELECT count(*) FROM mailbox WHERE recap_held = 1 AND state = 'pending'")[0][0],
        0
    );
    drop(early);
    drop(late);
    w.finish(10);
}

/// agent_steer of a stopping thread answers the original's text, with a message or with only
/// a timeout (a stopping thread has no timeout to extend).
#[test]
fn steering_a_stopping_thread_is_refused_with_the_originals_texts() {
    let w = world();
    w.base.script(
        "stubborn",
        &json!({"ignore_abort": true, "turns": [{"steps": [{"delay_ms": 2500}, {"text": "done anyway"}]}]})
            .to_string(),
    );
    let mut root = w.root("stubborn", &[]);
    spawn_detached(&mut root, "s", "t");
    wait_for("s running", Duration::from_secs(10), || {
        w.sql("SELECT agent_state FROM threads WHERE path = '/root/s'")[0][0] == "running"
    });
    // The stop waits for the run, which ignores the abort for a while: s is stopping.
    let stop = root.send("agent_stop", json!({"path": "s"}));
    wait_for("the stop request", Duration::from_secs(10), || {
        w.sql("SELECT agent_stop_requested FROM threads WHERE path = '/root/s'")[0][0] == 1
    });
    let (code, m) = fail(
        &mut root,
        "agent_steer",
        json!({"path": "s", "message": "go on"}),
    );
    assert_eq!(code, "conflict");
    assert!(
        m.starts_with("Thread is stopping; wait for stopped state before resuming. Repair:"),
        "{m}"
    );
    let (code, m) = fail(
        &mut root,
        "agent_steer",
        json!({"path": "s", "timeoutMs": 30000}),
    );
    assert_eq!(code, "conflict");
    assert!(
        m.starts_with("Only a working agent has a timeout to extend. Repair:"),
        "{m}"
    );
    let r = root.response(stop, Duration::from_secs(30));
    assert_eq!(r["result"]["details"]["state"], "stopped", "{r}");
    drop(root);
    w.finish(15);
}

/// A child that settles before its deadline has its timer cleared with the settlement: no
/// notice ever comes for it.
#[test]
fn settling_before_the_deadline_clears_the_timer() {
    let w = world();
    let mut root = w.root("quick", &[("THREADBASE_TEST_TIMEOUT_DIVISOR", "100")]);
    // 60,000 ms / 100: 600 ms; the quick child answers after 100 ms.
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "q", "type": "worker", "task": "t", "timeoutMs": 60000}),
    );
    assert_eq!(v["state"], "completed");
    assert_eq!(
        w.sql("SELECT agent_timeout_at, agent_timeout_ms FROM threads WHERE path = '/root/q'"),
        vec![vec![Value::Null, Value::Null]]
    );
    std::thread::sleep(Duration::from_millis(900));
    assert!(
        !notices(&root).iter().any(|n| n["kind"] == "timeout"),
        "{:?}",
        notices(&root)
    );
    drop(root);
    w.finish(10);
}

/// Held results are rows: when the serve of the last outstanding detached child is killed,
/// the next serve's restore pauses that child (no result of its own) and the held result is
/// delivered as the recap; nothing is lost.
#[test]
fn held_recap_results_survive_a_killed_serve() {
    let w = world();
    w.base.script(
        "staggered",
        &json!({"turns": [{"steps": [{"delay_ms": 300}, {"text": "answer to {prompt}"}]}]})
            .to_string(),
    );
    settings(&w, &json!({"finalRecap": true}));
    let mut early = w.root("staggered", &[]);
    let mut late = w.root("slow", &[]);
    spawn_detached(&mut early, "one", "first");
    spawn_detached(&mut late, "two", "second");
    wait_for("one held", Duration::from_secs(10), || {
        w.sql("SELECT count(*) FROM mailbox WHERE recap_held = 1 AND state = 'pending'")[0][0] == 1
    });
    // SIGKILL the serve that holds "two" mid-run.
    late.child.kill().unwrap();
    late.child.wait().unwrap();
    let mut again = w.root("quick", &[]);
    let st = call(&mut again, "agent_status", json!({"path": "two"}));
    assert_eq!(st["state"], "paused", "{st}");
    let all = || {
        let mut n = notices(&early);
        n.extend(notices(&again));
        n
    };
    wait_for("the recap", Duration::from_secs(10), || {
        all().iter().any(|n| n["kind"] == "recap")
    });
    let recap = all().into_iter().find(|n| n["kind"] == "recap").unwrap();
    assert_eq!(
        recap["text"],
        "All detached subagents have reported (1 result).\n\nAgent /root/one completed. Final answer:\nanswer to first\n\nSummarize these results in one reply."
    );
    assert_eq!(
        w.sql("SELECT count(*) FROM mailbox WHERE recap_held = 1 AND state = 'pending'")[0][0],
        0
    );
    drop(early);
    drop(again);
    w.finish(10);
}

/// A timer armed by one serve for a run another serve holds is fired by the holder (the row is
/// the only link), and the notice goes to the thread's parent's serve.
#[test]
fn a_timer_armed_elsewhere_is_fired_by_the_serve_that_holds_the_run() {
    let w = world();
    let mut root = w.root("slow", &[("THREADBASE_TEST_TIMEOUT_DIVISOR", "100")]);
    spawn_detached(&mut root, "p", "lead");
    let mut p = w.child("/root/p", "slow");
    spawn_detached(&mut p, "q", "dig");
    wait_for("q running", Duration::from_secs(10), || {
        w.sql("SELECT agent_state FROM threads WHERE path = '/root/p/q'")[0][0] == "running"
    });
    // The root arms q's timer; p's serve holds q's run.
    call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/p/q", "timeoutMs": 30000}),
    );
    wait_for("q's timeout notice at p", Duration::from_secs(10), || {
        notices(&p).iter().any(|n| n["kind"] == "timeout")
    });
    let n = notices(&p)
        .into_iter()
        .find(|n| n["kind"] == "timeout")
        .unwrap();
    assert_eq!(
        (&n["path"], &n["recipient"]),
        (&json!("/root/p/q"), &json!("/root/p"))
    );
    assert!(!notices(&root).iter().any(|n| n["kind"] == "timeout"));
    let q = call(&mut root, "agent_wait", json!({"path": "/root/p/q"}));
    assert_eq!(q["state"], "completed", "{q}");
    drop(p);
    drop(root);
    w.finish(15);
}
