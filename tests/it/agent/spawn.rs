//! `agent_spawn`: a blocking spawn's answer and a detached one's notice, the child's
//! transcript, paths, access and limits, independent roots (and a restore that refuses their
//! broken link), the report-only timeout it arms, and the final recap of detached results.

use super::Says::{Any, Has, Starts};
use super::{
    call, notices, refused, session_lines, settings, spawn, spawn_detached, talker, wait_for, world,
};
use crate::support::serve_client::session_user_texts as user_texts;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

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
    // Foreign keys off for these writes: SQLite's pragma (outside a transaction, on a
    // connection of its own), PostgreSQL's replica role (for the transaction).
    let broken = "UPDATE threads SET agent_state = 'running', status = 'live', owner_pid = 999999999, owner_started_at = 1 WHERE path = '/k/l';
         UPDATE threads SET path = '/k2', task_name = 'k2' WHERE path = '/k';";
    if crate::support::database_is_sqlite(&w.base.db) {
        rusqlite::Connection::open(&w.base.db)
            .unwrap()
            .execute_batch(&format!("PRAGMA foreign_keys = OFF; {broken}"))
            .unwrap();
    } else {
        crate::support::sql::exec(
            &w.base.db,
            &format!("SET LOCAL session_replication_role = replica; {broken}"),
        );
    }
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

/// A blocking spawn's timer reports too (0.19 sends the notice whenever it fires while the
/// child works): the parent gets the `timeout` notice while its call still waits, and the
/// call keeps waiting for the child's answer, which is its result. The settlement's notice is
/// still superseded by that result; the timeout's row was sent, not just marked delivered.
#[test]
fn a_blocking_spawns_timeout_notice_reaches_the_parent_while_it_waits() {
    let w = world();
    talker(&w);
    let mut root = w.root("talker", &[("THREADBASE_TEST_TIMEOUT_DIVISOR", "100")]);
    let id = root.send(
        "agent_spawn",
        json!({"path": "slow", "type": "worker", "task": "t", "timeoutMs": 30000}),
    );
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
    // The notice came while the call was still waiting for the child.
    assert_eq!(
        w.sql("SELECT agent_state FROM threads WHERE path = '/root/slow'")[0][0],
        "running"
    );
    let r = root.response(id, Duration::from_secs(60));
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(r["result"]["details"]["state"], "completed", "{r}");
    assert_eq!(r["result"]["details"]["output"], "final answer", "{r}");
    std::thread::sleep(Duration::from_millis(400));
    let n = notices(&root);
    assert_eq!(
        n.iter().filter(|n| n["kind"] == "timeout").count(),
        1,
        "{n:?}"
    );
    // The answer was the tool result: no settlement notice repeats it.
    assert!(!n.iter().any(|n| n["kind"] == "notice"), "{n:?}");
    assert_eq!(
        w.sql("SELECT count(*) FROM mailbox WHERE direction = 'to_parent' AND state = 'pending'"),
        vec![vec![json!(0)]]
    );
    drop(root);
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

/// 0.19 resolves every child's thinking level, a type the settings do not define included:
/// the parent's, else the main session's (its session file's last level, else its argv's),
/// else `off`, clamped to what the model supports. The view says it, the row records it and
/// the child runs with it (`--thinking`, which its session file records).
#[test]
fn an_undefined_types_thinking_level_is_the_parents_else_the_main_sessions_else_off() {
    let w = world();
    w.base.script(
        "thinker",
        &json!({
            "list_models": [
                {"provider": "fake", "id": "m1"},
                {"provider": "fake", "id": "think", "reasoning": true}
            ],
            "turns": [{"steps": [{"delay_ms": 3000}, {"text": "thought about {prompt}"}]}]
        })
        .to_string(),
    );
    settings(
        &w,
        &json!({"agentTypes": {"deep": {"model": "fake/think", "thinkingLevel": "high"}}}),
    );
    let level_in_session = |v: &Value| -> Vec<Value> {
        session_lines(&PathBuf::from(v["sessionFile"].as_str().unwrap()))
            .into_iter()
            .filter(|e| e["type"] == "thinking_level_change")
            .map(|e| e["thinkingLevel"].clone())
            .collect()
    };
    // No level anywhere: off.
    let mut root = w.root("thinker", &[]);
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "a", "type": "worker", "task": "a"}),
    );
    assert_eq!(v["thinkingLevel"], "off", "{v}");
    assert_eq!(
        w.sql("SELECT agent_thinking FROM threads WHERE path = '/root/a'"),
        vec![vec![json!("off")]]
    );

    // The main session's level: its session file's last thinking_level_change.
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&w.root_session)
        .unwrap();
    std::io::Write::write_all(
        &mut file,
        format!(
            "{}\n",
            json!({"type":"thinking_level_change","id":"m0000005","parentId":"m0000004","timestamp":"2026-11-30T00:00:05.000Z","thinkingLevel":"medium"})
        )
        .as_bytes(),
    )
    .unwrap();
    drop(file);
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "b", "type": "worker", "task": "b"}),
    );
    assert_eq!(v["thinkingLevel"], "medium", "{v}");
    assert_eq!(level_in_session(&v), vec![json!("medium")]);

    // The parent's level comes before the main session's: a child of a `deep` thread (high).
    let p = call(
        &mut root,
        "agent_spawn",
        json!({"path": "p", "type": "deep", "task": "p", "wait": false}),
    );
    assert_eq!(p["thinkingLevel"], "high", "{p}");
    let mut child = w.child("/root/p", "thinker");
    let v = call(
        &mut child,
        "agent_spawn",
        json!({"path": "q", "type": "worker", "task": "q"}),
    );
    assert_eq!(v["path"], "/root/p/q");
    assert_eq!(v["thinkingLevel"], "high", "{v}");
    assert_eq!(level_in_session(&v), vec![json!("high")]);
    drop(child);

    // Clamped: the main session runs fake/m1, which does not reason, so medium becomes off.
    let mut flat = w.root_with_args("thinker", &[], r#"["pi","--model","fake/m1"]"#);
    let v = call(
        &mut flat,
        "agent_spawn",
        json!({"path": "c", "type": "worker", "task": "c"}),
    );
    assert_eq!(v["thinkingLevel"], "off", "{v}");
    assert_eq!(v["model"], "fake/m1", "{v}");
    call(&mut root, "agent_wait", json!({"path": "p"}));
    drop(flat);
    drop(root);
    w.finish(15);
}
