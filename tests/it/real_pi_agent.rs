//! Contract B end to end with real Pi children (fake LLM), three levels deep: the test is the
//! main conversation's `serve` (/root); /root/a is a real Pi whose threadbase extension
//! (THREADBASE_TOOLS=agent) reports progress and spawns /root/a/b through its own `serve`; the
//! root steers the running grandchild (delivered by /root/a's serve, which holds it), the
//! grandchild pauses itself, and a second steer resumes it in the same session file.
//! Skips without Pi unless CI=true.

use crate::support::fake_llm;
use crate::support::serve_client;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fake_llm::{content_text, hermetic_pi_env, pi_or_skip, FakeLlm, Step};
use serde_json::{json, Value};
use serve_client::{serve_with_pi_children, session_user_texts, Serve};

fn call(s: &mut Serve, method: &str, params: Value) -> Value {
    let id = s.send(method, params.clone());
    let r = s.response(id, Duration::from_secs(180));
    assert!(
        r.get("error").is_none(),
        "{method} {params} failed: {r}\nserve stderr: {}",
        String::from_utf8_lossy(&s.stderr.lock().unwrap())
    );
    r["result"]["details"].clone()
}

#[test]
fn three_levels_of_real_pi_with_update_pause_and_steer() {
    let Some(pi) = pi_or_skip("three_levels_of_real_pi_with_update_pause_and_steer") else {
        return;
    };
    let fake = FakeLlm::start();
    // /root/a: report progress, spawn /root/a/b and wait for it, then answer.
    fake.route(
        |r| r.last_is_user("A-TASK"),
        Step::tool_call("agent_update", json!({"message": "A is working"})),
    );
    fake.route(
        |r| {
            r.last_tool_result()
                .is_some_and(|t| t.contains("A is working"))
        },
        Step::tool_call(
            "agent_spawn",
            json!({"path": "b", "type": "worker", "task": "B-TASK: investigate the cache"}),
        ),
    );
    // /root/a/b: works (a slow shell command), takes the root's steer, pauses itself.
    fake.route(
        |r| r.last_is_user("B-TASK"),
        Step::bash("sleep 3; echo looked"),
    );
    fake.route(
        |r| r.last_is_user("STEER-1"),
        Step::tool_call("agent_pause", json!({"reason": "need the cache policy"})),
    );
    // /root/a again, after its spawn returned the paused child.
    fake.route(
        |r| {
            r.messages().iter().any(|m| {
                m["role"] == "tool" && content_text(&m["content"]).contains("\"state\": \"paused\"")
            }) && r.last_user_text().is_some_and(|t| !t.contains("STEER"))
        },
        Step::text("A done: b is paused"),
    );
    // /root/a/b resumed by the second steer.
    fake.route(
        |r| r.last_is_user("STEER-2"),
        Step::text("B final: use LRU"),
    );

    let env = hermetic_pi_env(&fake);
    let extension = concat!(env!("CARGO_MANIFEST_DIR"), "/pi-extension/index.ts");
    let argv = env.child_command(&pi, &["-e", extension]);
    let db = env.root.path().join("db.sqlite");
    let mut root = serve_with_pi_children(&db, &env.env, &env.cwd, &argv, "agent", "ses_root");

    let a = call(
        &mut root,
        "agent_spawn",
        json!({"path": "a", "type": "worker", "task": "A-TASK: delegate the cache study", "wait": false}),
    );
    // A detached spawn answers with the thread as its run starts, as the original's does.
    assert_eq!(
        (&a["state"], &a["status"]),
        (&json!("starting"), &json!("Starting")),
        "{a}"
    );
    assert_eq!(
        (&a["owner"], &a["type"]),
        (&json!("/root"), &json!("worker")),
        "{a}"
    );

    // Wait until /root/a/b runs its shell command, then steer it from the root: /root/a's serve
    // holds its process and delivers the row into Pi's steering queue.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !fake
        .completion_requests()
        .iter()
        .any(|r| r.last_is_user("B-TASK"))
    {
        assert!(
            Instant::now() < deadline,
            "b never asked the model; stderr: {}",
            String::from_utf8_lossy(&root.stderr.lock().unwrap())
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let b = call(&mut root, "agent_status", json!({"path": "/root/a/b"}));
    assert_eq!(b["state"], "running", "{b}");
    call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a/b", "message": "STEER-1: stop and ask me first"}),
    );

    // /root/a completes after b pauses.
    let a = call(
        &mut root,
        "agent_wait",
        json!({"path": "/root/a", "timeoutMs": 150000}),
    );
    let requests = || {
        fake.completion_requests()
            .iter()
            .map(|r| {
                let m = r.messages();
                format!(
                    "route {:?}: last user {:?}; last {}",
                    r.route,
                    r.last_user_text(),
                    m.last().map(|l| l.to_string()).unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(a["state"], "completed", "{a}\n{}", requests());
    assert_eq!(a["output"], "A done: b is paused");
    let b = call(&mut root, "agent_status", json!({"path": "/root/a/b"}));
    assert_eq!(b["state"], "paused", "{b}");
    assert_eq!(b["status"], "need the cache policy");

    // The root got /root/a's progress as a notice; its completion came back as the wait's
    // result, so no notice repeats it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let texts = loop {
        let texts: Vec<String> = root
            .notifications()
            .into_iter()
            .filter(|n| n["method"] == "notice")
            .filter_map(|n| n["params"]["text"].as_str().map(str::to_string))
            .collect();
        if !texts.is_empty() || Instant::now() > deadline {
            std::thread::sleep(Duration::from_millis(500));
            break root
                .notifications()
                .into_iter()
                .filter(|n| n["method"] == "notice")
                .filter_map(|n| n["params"]["text"].as_str().map(str::to_string))
                .collect::<Vec<_>>();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        texts.contains(&"Progress from /root/a: A is working".to_string()),
        "{texts:?}"
    );
    assert!(
        !texts
            .iter()
            .any(|t| t.starts_with("Agent /root/a completed.")),
        "{texts:?}"
    );

    // Resume the paused grandchild in its own session file.
    call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a/b", "message": "STEER-2: LRU or LFU?"}),
    );
    let b = call(
        &mut root,
        "agent_wait",
        json!({"path": "/root/a/b", "timeoutMs": 120000}),
    );
    assert_eq!(b["state"], "completed", "{b}");
    assert_eq!(b["output"], "B final: use LRU");

    // b's transcript: inherited /root/a's conversation, linked to a's file, each message once.
    let b_file = b["sessionFile"].as_str().unwrap().to_string();
    let texts = session_user_texts(Path::new(&b_file));
    for needle in ["A-TASK", "B-TASK", "STEER-1", "STEER-2"] {
        assert_eq!(
            texts.iter().filter(|t| t.contains(needle)).count(),
            1,
            "{needle}: {texts:?}"
        );
    }
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&b_file)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["parentSession"], a["sessionFile"]);
    assert!(PathBuf::from(&b_file).exists());

    let status = root.close(Duration::from_secs(60));
    assert!(status.success());
    let left = env.leftovers_after(Duration::from_secs(15));
    assert!(left.is_empty(), "{left:?}");
}

/// The golden scenario of the original's `tests/integration.test.ts`, with a real Pi child:
/// a child that pauses on its first turn comes back paused with no answer, after exactly one
/// model request; a reopened parent (a new serve of the same session) still sees it paused;
/// steering resumes the same session twice ("child answer 2", "child answer 3"), each turn
/// seeing the previous one; a forked main session starts with an empty registry (`[]`).
#[test]
fn golden_pause_resume_across_a_parent_reopen_and_a_fork() {
    let Some(pi) = pi_or_skip("golden_pause_resume_across_a_parent_reopen_and_a_fork") else {
        return;
    };
    let fake = FakeLlm::start();
    fake.route(
        |r| r.last_is_user("Pause until more input"),
        Step::tool_call("agent_pause", json!({"reason": "Need parent input"})),
    );
    fake.route(
        |r| r.last_is_user("Resume paused child"),
        Step::text("child answer 2"),
    );
    fake.route(
        |r| r.last_is_user("More work after completion"),
        Step::text("child answer 3"),
    );
    let env = hermetic_pi_env(&fake);
    let extension = concat!(env!("CARGO_MANIFEST_DIR"), "/pi-extension/index.ts");
    let argv = env.child_command(&pi, &["-e", extension]);
    let db = env.root.path().join("db.sqlite");

    let mut root = serve_with_pi_children(&db, &env.env, &env.cwd, &argv, "agent", "ses_root");
    let paused = call(
        &mut root,
        "agent_spawn",
        json!({"path": "worker", "type": "offline", "task": "Pause until more input"}),
    );
    assert_eq!(paused["state"], "paused", "{paused}");
    assert!(
        paused.get("output").is_none(),
        "pause must not hand back an answer: {paused}"
    );
    assert_eq!(paused["status"], "Need parent input");
    assert_eq!(paused["type"], "offline");
    assert_eq!(
        fake.completion_requests().len(),
        1,
        "pause stops before another provider turn"
    );
    let child_file = paused["sessionFile"].as_str().unwrap().to_string();
    assert!(std::fs::read_to_string(&child_file)
        .unwrap()
        .contains("Need parent input"));
    assert!(root.close(Duration::from_secs(60)).success());

    // The parent reopened: the thread is retained, paused, in the same file; no model call.
    let mut root = serve_with_pi_children(&db, &env.env, &env.cwd, &argv, "agent", "ses_root");
    let restored = call(&mut root, "agent_status", json!({"path": "worker"}));
    assert_eq!(restored["state"], "paused", "{restored}");
    assert_eq!(restored["sessionFile"], child_file.as_str());
    assert_eq!(
        fake.completion_requests().len(),
        1,
        "restoring does not invoke a model"
    );
    let steered = call(
        &mut root,
        "agent_steer",
        json!({"path": "worker", "message": "Resume paused child"}),
    );
    assert_eq!(steered["state"], "starting", "{steered}");
    let completed = call(&mut root, "agent_wait", json!({"path": "worker"}));
    assert_eq!(completed["state"], "completed", "{completed}");
    assert_eq!(completed["output"], "child answer 2");
    assert_eq!(completed["sessionFile"], child_file.as_str());
    let second = &fake.completion_requests()[1];
    let seen = json!(second.messages()).to_string();
    assert!(
        seen.contains("Need parent input"),
        "resume retains the previous tool call: {seen}"
    );
    assert!(root.close(Duration::from_secs(60)).success());

    let mut root = serve_with_pi_children(&db, &env.env, &env.cwd, &argv, "agent", "ses_root");
    assert_eq!(
        call(&mut root, "agent_status", json!({"path": "worker"}))["state"],
        "completed"
    );
    call(
        &mut root,
        "agent_steer",
        json!({"path": "worker", "message": "More work after completion"}),
    );
    let continued = call(&mut root, "agent_wait", json!({"path": "worker"}));
    assert_eq!(continued["state"], "completed", "{continued}");
    assert_eq!(continued["output"], "child answer 3");
    assert_eq!(continued["sessionFile"], child_file.as_str());
    let third = &fake.completion_requests()[2];
    assert!(json!(third.messages())
        .to_string()
        .contains("child answer 2"));
    assert_eq!(
        fake.completion_requests().len(),
        3,
        "notifications never trigger a model call"
    );
    let page = call(
        &mut root,
        "agent_output",
        json!({"path": "worker", "offset": 6, "limit": 6}),
    );
    assert_eq!(
        page,
        json!({"path": "/root/worker", "text": "answer", "totalCharacters": 14, "nextOffset": 12})
    );
    assert!(root.close(Duration::from_secs(60)).success());

    // A forked main session (another session id) starts with an empty registry.
    let mut fork = serve_with_pi_children(&db, &env.env, &env.cwd, &argv, "agent", "ses_fork");
    assert_eq!(call(&mut fork, "agent_status", json!({})), json!([]));
    assert!(fork.close(Duration::from_secs(60)).success());
    let left = env.leftovers_after(Duration::from_secs(15));
    assert!(left.is_empty(), "{left:?}");
}
