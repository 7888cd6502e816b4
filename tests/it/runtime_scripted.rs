//! The runtime supervising `threadbase scripted-agent` children (Pi's RPC protocol, scripted):
//! dialogs auto-cancelled and recorded, stderr tails capped, crashes classified, retained
//! text, and the idle-cleanup and live-timeout timers.

use crate::support::runtime::RuntimeDb;

use std::time::Duration;

use serde_json::{json, Value};
use threadbase::domain::ThreadId;
use threadbase::runtime::mapping::Phase;
use threadbase::runtime::{LaunchSpec, RuntimeConfig, SendMode, StartKind};

struct Fixture {
    db: RuntimeDb,
    dir: tempfile::TempDir,
}

impl std::ops::Deref for Fixture {
    type Target = RuntimeDb;
    fn deref(&self) -> &RuntimeDb {
        &self.db
    }
}

fn fixture(config: RuntimeConfig) -> Fixture {
    Fixture {
        db: RuntimeDb::new("ses_scripted", config),
        dir: tempfile::tempdir().unwrap(),
    }
}

impl Fixture {
    fn spec(&self, n: u64, script: Value, start: StartKind) -> LaunchSpec {
        let id = self.starting_thread(n, &format!("s{n}"));
        let script_path = self.dir.path().join(format!("script{n}.json"));
        std::fs::write(&script_path, script.to_string()).unwrap();
        let session = self.dir.path().join(format!("s{n}.jsonl"));
        LaunchSpec {
            thread_id: id,
            argv: vec![
                env!("CARGO_BIN_EXE_threadbase").into(),
                "scripted-agent".into(),
                "--script".into(),
                script_path.display().to_string(),
                "--mode".into(),
                "rpc".into(),
                "--session".into(),
                session.display().to_string(),
                "--name".into(),
                format!("s{n}"),
            ],
            cwd: self.dir.path().to_path_buf(),
            env: vec![],
            clear_env: false,
            start,
        }
    }

    async fn until(&self, id: &ThreadId, what: impl Fn(&threadbase::runtime::ChildView) -> bool) {
        let mut view = self.rt.watch(id).expect("live");
        tokio::time::timeout(Duration::from_secs(20), view.wait_for(what))
            .await
            .expect("in time")
            .ok();
        self.rt.flush().await;
    }

    fn row(&self, id: &ThreadId) -> Value {
        self.row_json(
            id,
            "'status', status, 'phase', phase, 'exit_kind', exit_kind, 'exit_code', exit_code,
             'exit_signal', exit_signal, 'assistant', o.last_assistant_text, 'partial', o.last_partial_text,
             'stderr_len', length(o.stderr_tail), 'stderr_dropped', o.stderr_dropped, 'last_seq', last_seq",
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialogs_are_cancelled_at_once_and_recorded() {
    let f = fixture(RuntimeConfig::default());
    let script = json!({"turns": [{"steps": [
        {"ui": "confirm", "title": "Delete everything?"},
        {"ui": "notify", "title": "heads up"},
        {"text": "dialog said {ui}"}
    ]}]});
    let spec = f.spec(1, script, StartKind::Prompt("go".into()));
    let id = spec.thread_id.clone();
    assert_eq!(f.rt.launch(spec).await.unwrap().prompt_accepted, Some(true));
    f.until(&id, |v| v.phase == Phase::Idle).await;
    let evs = f.events(&id);
    let ui: Vec<&Value> = evs
        .iter()
        .filter(|(k, _)| k == "ui_request")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(
        ui[0],
        &json!({"method": "confirm", "title": "Delete everything?", "autoCancelled": true})
    );
    assert_eq!(ui[1]["autoCancelled"], false);
    assert_eq!(f.row(&id)["assistant"], "dialog said cancelled");
    f.rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_tail_is_capped_and_crashes_are_failed() {
    let f = fixture(RuntimeConfig::default());
    let big = "e".repeat(20_000);
    let script = json!({"turns": [{"steps": [{"stderr": big}, {"text": "partial work", "deltas": 4}, {"crash": true}]}]});
    let spec = f.spec(2, script, StartKind::Prompt("go".into()));
    let id = spec.thread_id.clone();
    f.rt.launch(spec).await.unwrap();
    f.until(&id, |v| v.closed).await;
    let row = f.row(&id);
    assert_eq!(
        (row["exit_kind"].as_str(), row["phase"].as_str()),
        (Some("failed"), Some("failed"))
    );
    assert_eq!(row["exit_signal"], "SIGKILL");
    assert_eq!(row["stderr_len"], 12_000);
    assert!(row["stderr_dropped"].as_i64().unwrap() >= 8_000);
    assert_eq!(row["assistant"], "partial work");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_turns_keep_forty_events_and_the_newest_text() {
    let f = fixture(RuntimeConfig::default());
    let steps: Vec<Value> = (0..30)
        .map(|i| json!({"tool": "bash", "args": {"command": format!("echo {i}")}, "result": "ok"}))
        .collect();
    let mut all = steps.clone();
    all.push(json!({"text": "final answer", "deltas": 50}));
    let spec = f.spec(
        3,
        json!({"turns": [{"steps": all}]}),
        StartKind::Prompt("go".into()),
    );
    let id = spec.thread_id.clone();
    f.rt.launch(spec).await.unwrap();
    f.until(&id, |v| v.phase == Phase::Idle).await;
    let evs = f.events(&id);
    assert_eq!(evs.len(), 40);
    let row = f.row(&id);
    assert!(row["last_seq"].as_i64().unwrap() > 60, "{row}");
    assert_eq!(row["assistant"], "final answer");
    assert!(
        row["partial"].is_null(),
        "partial text ends with the message"
    );
    // A follow-up on the idle thread runs again (default reply).
    let sent = f.rt.send(&id, SendMode::Prompt, "again").await.unwrap();
    assert_eq!(sent.accepted, Some(true));
    f.until(&id, |v| v.phase == Phase::Idle).await;
    assert_eq!(f.row(&id)["assistant"], "done: again");
    f.rt.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_cleanup_stops_an_idle_child_and_activity_does_not_count() {
    let f = fixture(RuntimeConfig {
        idle_cleanup: Some(Duration::from_millis(600)),
        ..RuntimeConfig::default()
    });
    let spec = f.spec(4, json!({"turns": ["hi"]}), StartKind::Prompt("go".into()));
    let id = spec.thread_id.clone();
    let started = std::time::Instant::now();
    f.rt.launch(spec).await.unwrap();
    f.until(&id, |v| v.phase == Phase::Idle).await;
    // Polls do not extend the idle clock.
    for _ in 0..3 {
        f.rt.refresh(&id, Duration::from_secs(2)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    f.until(&id, |v| v.closed).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(600) && took < Duration::from_secs(5),
        "{took:?}"
    );
    let row = f.row(&id);
    assert_eq!(row["exit_kind"], "stopped");
    let kinds: Vec<String> = f.events(&id).into_iter().map(|(k, _)| k).collect();
    assert!(kinds.contains(&"thread_stopping".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_timeout_stops_a_busy_child() {
    let f = fixture(RuntimeConfig {
        live_timeout: Some(Duration::from_millis(700)),
        ..RuntimeConfig::default()
    });
    let spec = f.spec(
        5,
        json!({"turns": [{"steps": [{"delay_ms": 30000}, {"text": "late"}]}]}),
        StartKind::Prompt("go".into()),
    );
    let id = spec.thread_id.clone();
    let started = std::time::Instant::now();
    f.rt.launch(spec).await.unwrap();
    f.until(&id, |v| v.closed).await;
    assert!(started.elapsed() < Duration::from_secs(6));
    assert_eq!(f.row(&id)["exit_kind"], "stopped");
}

/// The scripted agent drops a prompt written before the last one was answered, as Pi 1.6 does
/// (tests/it/real_pi_runtime.rs shows it with real Pi): the runtime's one-prompt-at-a-time gate
/// keeps a follow-up sent during startup, and a refresh that the agent answers during a
/// prompt's preflight does not read idle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_sent_before_an_answer_are_kept_and_do_not_read_idle() {
    let f = fixture(RuntimeConfig::default());
    let script =
        json!({"startup_delay_ms": 300, "preflight_ms": 1000, "default_reply": "re: {prompt}"});
    let spec = f.spec(1, script, StartKind::Prompt("start".into()));
    let id = spec.thread_id.clone();
    let (launched, sent) = tokio::join!(f.rt.launch(spec), async {
        while !f.rt.is_live(&id) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        f.rt.send(&id, SendMode::FollowUp, "early").await
    });
    assert_eq!(launched.unwrap().prompt_accepted, Some(true));
    assert_eq!(sent.unwrap().accepted, Some(true));
    f.until(&id, |v| v.phase == Phase::Idle).await;
    assert_eq!(f.row(&id)["assistant"], "re: early", "the follow-up ran");

    // A refresh written while a send's prompt is in its preflight.
    let settled = f.rt.watch(&id).unwrap().borrow().settles;
    let rt = f.rt.clone();
    let send_id = id.clone();
    let send = tokio::spawn(async move { rt.send(&send_id, SendMode::Prompt, "again").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (idle, state) = f.rt.refresh(&id, Duration::from_secs(5)).await.unwrap();
    assert_eq!(state["isStreaming"], false, "answered during the preflight");
    assert!(!idle, "a prompt is still unanswered");
    assert_eq!(send.await.unwrap().unwrap().accepted, Some(true));
    f.until(&id, |v| v.settles > settled).await;
    assert_eq!(f.row(&id)["assistant"], "re: again");
    f.rt.shutdown().await;
}

/// A thread is starting from its row's insert, before its child exists: `await_launch` holds a
/// send or wait arriving in between until the reserved launch has registered its child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn await_launch_bridges_a_reserved_launch_until_its_child_exists() {
    let f = fixture(RuntimeConfig::default());
    let spec = f.spec(
        1,
        json!({"preflight_ms": 500}),
        StartKind::Prompt("go".into()),
    );
    let id = spec.thread_id.clone();
    // No reservation: nothing to wait for.
    let t = std::time::Instant::now();
    f.rt.await_launch(&id, Duration::from_secs(10)).await;
    assert!(!f.rt.is_live(&id) && t.elapsed() < Duration::from_secs(5));

    let reservation = f.rt.reserve_launch(&id);
    let rt = f.rt.clone();
    let waiter_id = id.clone();
    let waiter = tokio::spawn(async move {
        rt.await_launch(&waiter_id, Duration::from_secs(20)).await;
        rt.is_live(&waiter_id)
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "waits while the launch has no child");
    let launch = f.rt.launch(spec);
    let (out, live) = tokio::join!(launch, waiter);
    assert_eq!(out.unwrap().prompt_accepted, Some(true));
    assert!(live.unwrap(), "woke with the child registered");
    drop(reservation);
    f.rt.shutdown().await;
}

/// `Runtime::abort` waits for an unanswered prompt, since the agent (like Pi 1.6) ignores an
/// abort written during a prompt's preflight: a thread interrupted while starting is aborted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_while_starting_waits_for_the_prompt_and_aborts_its_run() {
    let f = fixture(RuntimeConfig::default());
    let script = json!({"preflight_ms": 300, "turns": [{"steps": [{"delay_ms": 3000}, {"text": "too late"}]}]});
    let spec = f.spec(1, script, StartKind::Prompt("go".into()));
    let id = spec.thread_id.clone();
    let (launched, aborted) = tokio::join!(f.rt.launch(spec), async {
        while !f.rt.is_live(&id) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        f.rt.abort(&id, Duration::from_secs(5)).await
    });
    assert_eq!(launched.unwrap().prompt_accepted, Some(true));
    assert!(aborted.unwrap().success);
    f.until(&id, |v| v.phase == Phase::Idle).await;
    assert_eq!(f.row(&id)["assistant"], Value::Null, "the run was aborted");
    f.rt.shutdown().await;
}
