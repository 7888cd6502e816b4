//! The `thread` tool's main flows through `threadbase serve` with real Pi 1.6 children against
//! the loopback fake LLM: start, wait, poll, send, stop, resume on the saved session, fork with
//! the history carried over, and stdin EOF. Skips without Pi unless CI=true.

use crate::support::{common, fake_llm, serve_client};

use std::time::Duration;

use fake_llm::{hermetic_pi_env, pi_or_skip, FakeLlm, Step};
use serde_json::{json, Value};
use serve_client::{Serve, ServeSpec};

fn details(r: &Value) -> &Value {
    &r["details"]
}

/// A serve for the parent session `session_id` (a session file with only its header) whose
/// children are real Pi with the hermetic flags; returns it, its database and the session file.
fn serve_on_a_session_file(
    env: &fake_llm::PiEnv,
    pi: &[String],
    session_id: &str,
) -> (Serve, std::path::PathBuf, std::path::PathBuf) {
    // The child command: Pi plus the hermetic flags, minus the ones serve manages itself.
    let argv = env.child_command(pi, &[]);
    let sessions = env.agent_dir.join("sessions").join("parent");
    std::fs::create_dir_all(&sessions).unwrap();
    let parent_session = sessions.join("parent.jsonl");
    std::fs::write(
        &parent_session,
        format!("{}\n", json!({"type":"session","version":3,"id":session_id,"timestamp":"2026-11-30T00:00:00.000Z","cwd":env.cwd})),
    )
    .unwrap();
    let db = env.root.path().join("db.sqlite");
    let mut vars = env.env.clone();
    vars.push((
        "THREADBASE_PI_COMMAND".into(),
        serde_json::to_string(&argv).unwrap(),
    ));
    let s = Serve::start(ServeSpec {
        db: &db,
        args: vec![
            "--session-file".into(),
            parent_session.display().to_string(),
            "--cwd".into(),
            env.cwd.display().to_string(),
        ],
        env: vars,
        cwd: env.cwd.clone(),
        clear_env: true,
    });
    (s, db, parent_session)
}

#[test]
fn real_pi_children_through_serve() {
    let Some(pi) = pi_or_skip("real_pi_children_through_serve") else {
        return;
    };
    let fake = FakeLlm::with_script([
        Step::text("First answer: 41."),
        Step::text("Second answer: 42."),
        Step::text("Fork answer: remembered 42."),
    ]);
    let env = hermetic_pi_env(&fake);
    let (mut s, db, parent_session) = serve_on_a_session_file(&env, &pi, "ses_real_parent");

    let r =
        s.thread(json!({"action": "start", "prompt": "What is the answer?", "taskName": "answer"}));
    assert_eq!(details(&r)["promptAccepted"], true, "{r}");
    // The launch asked real Pi's state before the prompt (as pi-threads does), so the start's
    // own snapshot already has the session's name and pending count.
    assert_eq!(
        (
            &details(&r)["snapshot"]["session"]["name"],
            &details(&r)["snapshot"]["session"]["pendingMessageCount"]
        ),
        (&json!("What is the answer?"), &json!(0)),
        "{r}"
    );
    let r = s.thread(json!({"action": "wait", "id": "answer", "timeoutMs": 60000}));
    assert_eq!(details(&r)["timedOut"], false);
    assert_eq!(details(&r)["snapshot"]["phase"], "idle");
    assert_eq!(
        details(&r)["snapshot"]["resultSummary"],
        "First answer: 41."
    );
    let session_file = details(&r)["snapshot"]["session"]["file"]
        .as_str()
        .unwrap()
        .to_string();
    // The session as pi-threads shows it: known, with the name and pending count real Pi's
    // get_state answered (the child runs with --name "<display name>").
    let session = &details(&r)["snapshot"]["session"];
    let keys: Vec<&str> = session
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        keys,
        ["kind", "file", "id", "name", "pendingMessageCount"],
        "{session}"
    );
    assert_eq!(session["kind"], "known", "{session}");
    assert_eq!(session["name"], "What is the answer?", "{session}");
    assert_eq!(session["pendingMessageCount"], 0, "{session}");
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&session_file)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(session["id"], header["id"], "{session}");
    // The title the content text uses is that session name.
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Wait completed after ")
            && text.contains("ms for \"What is the answer?\".\nPath: /root/answer\n"),
        "{text}"
    );

    let r = s.thread(json!({"action": "send", "id": "answer", "message": "Try again."}));
    assert_eq!(
        (
            details(&r)["mode"].as_str(),
            details(&r)["accepted"].as_bool()
        ),
        (Some("prompt"), Some(true))
    );
    let r = s.thread(json!({"action": "wait", "id": "answer", "timeoutMs": 60000}));
    assert_eq!(
        details(&r)["snapshot"]["resultSummary"],
        "Second answer: 42."
    );
    let r = s.thread(json!({"action": "poll", "id": "/root/answer", "detail": "full"}));
    let events: Vec<&str> = details(&r)["snapshot"]["recentEvents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(
        events.contains(&"assistant_message") && events.contains(&"turn_completed"),
        "{events:?}"
    );

    let r = s.thread(json!({"action": "stop", "id": "answer"}));
    assert_eq!(details(&r)["snapshot"]["exit"]["kind"], "stopped");
    // Pi wrote into the session file serve created for it, keeping serve's header.
    let text = std::fs::read_to_string(&session_file).unwrap();
    let header: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        header["parentSession"],
        parent_session.display().to_string()
    );
    assert!(text.contains("Second answer: 42."));

    let r = s.thread(json!({"action": "resume", "id": "answer"}));
    assert_eq!(
        (
            details(&r)["alreadyLive"].as_bool(),
            details(&r)["snapshot"]["phase"].as_str()
        ),
        (Some(false), Some("idle"))
    );
    assert_eq!(
        fake.completion_requests().len(),
        2,
        "resume sends no prompt"
    );

    let r = s.thread(json!({"action": "fork", "id": "answer", "taskName": "answer_fork"}));
    assert_eq!(details(&r)["kind"], "forked");
    let r = s.thread(
        json!({"action": "send", "id": "answer_fork", "message": "What did you say last?"}),
    );
    assert_eq!(details(&r)["accepted"], true);
    let r = s.thread(json!({"action": "wait", "id": "answer_fork", "timeoutMs": 60000}));
    assert_eq!(
        details(&r)["snapshot"]["resultSummary"],
        "Fork answer: remembered 42."
    );
    // The fork carried the history: the model saw the earlier answers.
    let last = fake.completion_requests().pop().unwrap();
    assert!(last.body.contains("Second answer: 42."), "{}", last.body);

    let status = s.close(Duration::from_secs(30));
    assert!(status.success());
    let live = common::count(&db, "SELECT count(*) FROM threads WHERE status = 'live'");
    assert_eq!(live, 0);
    assert!(
        env.leftover_processes().is_empty(),
        "{:?}",
        env.leftover_processes()
    );
}

/// pi-threads' "records a child session before a fast-finishing child closes", with real Pi:
/// the child accepts its prompt and dies during its first turn (its bash tool SIGKILLs Pi),
/// before anything asked its state after the launch. The closed thread still has its session's
/// name and pending count, which the launch's `get_state` (written before the prompt)
/// recorded, and its exit names only the signal.
#[test]
fn real_pi_child_that_dies_at_once_keeps_its_session_name_and_pending_count() {
    let Some(pi) =
        pi_or_skip("real_pi_child_that_dies_at_once_keeps_its_session_name_and_pending_count")
    else {
        return;
    };
    let fake = FakeLlm::with_script([Step::bash("kill -KILL $PPID")]);
    let env = hermetic_pi_env(&fake);
    let (mut s, _db, _session) = serve_on_a_session_file(&env, &pi, "ses_real_quick");

    let r = s.thread(json!({"action": "start", "prompt": "finish", "taskName": "quick"}));
    assert_eq!(details(&r)["promptAccepted"], true, "{r}");
    // Only list (which asks no child anything) until Pi has died.
    let snap = s.only_thread_once_closed(Duration::from_secs(60));
    assert_eq!(
        snap["exit"],
        json!({"kind": "failed", "message": "Child Pi process exited with signal SIGKILL"}),
        "{snap}"
    );
    let session = &snap["session"];
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(session["file"].as_str().unwrap())
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        session,
        &json!({"kind": "known", "file": session["file"], "id": header["id"],
                "name": "finish", "pendingMessageCount": 0}),
        "{snap}"
    );
    // The model was asked once: the child died in its first turn.
    assert_eq!(fake.completion_requests().len(), 1);

    assert!(s.close(Duration::from_secs(30)).success());
    let left = env.leftovers_after(Duration::from_secs(5));
    assert!(left.is_empty(), "{left:?}");
}
