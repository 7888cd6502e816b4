//! The runtime's process mechanics with real child processes (small shell scripts that speak
//! a few lines of Pi's protocol): event mapping into rows, exit classification, malformed
//! output, spawn failures, stop escalation through the process group.

use crate::support::runtime::{bash_launch, RuntimeDb};

use std::time::Duration;

use serde_json::{json, Value};
use threadbase::domain::ThreadId;
use threadbase::runtime::mapping::Phase;
use threadbase::runtime::signals::group_has_members;
use threadbase::runtime::{LaunchSpec, RuntimeConfig, StartKind};
use threadbase::store::events;

struct Fixture(RuntimeDb);

impl std::ops::Deref for Fixture {
    type Target = RuntimeDb;
    fn deref(&self) -> &RuntimeDb {
        &self.0
    }
}

fn fixture() -> Fixture {
    Fixture(RuntimeDb::new("ses_runtime", RuntimeConfig::default()))
}

impl Fixture {
    fn thread(&self, n: u64, name: &str) -> ThreadId {
        self.starting_thread(n, name)
    }

    fn spec(&self, id: &ThreadId, script: &str, start: StartKind) -> LaunchSpec {
        bash_launch(id, script, vec![], start)
    }

    fn row(&self, id: &ThreadId) -> Value {
        self.row_json(
            id,
            "'status', status, 'phase', phase, 'exit_kind', exit_kind, 'exit_code', exit_code,
             'exit_signal', exit_signal, 'exit_message', exit_message, 'pid', pid, 'pgid', pgid,
             'owner_pid', owner_pid, 'process_started_at', process_started_at,
             'assistant', o.last_assistant_text, 'stderr', CAST(o.stderr_tail AS TEXT),
             'session_name', o.session_name, 'pending', o.pending_message_count",
        )
    }

    fn event_types(&self, id: &ThreadId) -> Vec<String> {
        self.events(id).into_iter().map(|(kind, _)| kind).collect()
    }

    async fn closed(&self, id: &ThreadId) {
        for _ in 0..200 {
            if !self.rt.is_live(id) {
                self.rt.flush().await;
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{id} did not close");
    }
}

/// One run, as Pi 1.6 plays it after a launch with a prompt: the launch's `get_state` first
/// (written before the prompt), then the prompt and its events.
const ONE_RUN: &str = r#"
read -r line
id=$(printf '%s' "$line" | sed 's/.*"id":"\([^"]*\)".*/\1/')
printf '{"id":"%s","type":"response","command":"get_state","success":true,"data":{"isStreaming":false,"isCompacting":false,"sessionName":"one run","pendingMessageCount":0}}\n' "$id"
read -r line
id=$(printf '%s' "$line" | sed 's/.*"id":"\([^"]*\)".*/\1/')
printf '{"id":"%s","type":"response","command":"prompt","success":true,"data":{"disposition":"started"}}\n' "$id"
echo '{"type":"agent_start"}'
echo '{"type":"turn_start"}'
echo '{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"Hel"}}'
echo '{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"Hello there"}],"stopReason":"stop"}}'
echo 'this is not json'
echo 'warning: something' >&2
echo '{"type":"turn_end"}'
echo '{"type":"agent_end"}'
echo '{"type":"agent_settled","aborted":false}'
read -r ignored
exit 0
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_recorded_as_rows() {
    let f = fixture();
    let id = f.thread(1, "one_run");
    let out =
        f.rt.launch(f.spec(&id, ONE_RUN, StartKind::Prompt("hi".into())))
            .await
            .unwrap();
    assert_eq!(out.prompt_accepted, Some(true));
    // Wait for idle, then close stdin by stopping? The script exits after one more line.
    let mut view = f.rt.watch(&id).unwrap();
    tokio::time::timeout(
        Duration::from_secs(5),
        view.wait_for(|v| v.phase == threadbase::runtime::mapping::Phase::Idle),
    )
    .await
    .unwrap()
    .unwrap();
    f.rt.flush().await;
    let row = f.row(&id);
    assert_eq!(row["status"], "live");
    assert_eq!(row["phase"], "idle");
    assert_eq!(row["pid"], row["pgid"], "its own process group");
    assert_eq!(row["owner_pid"], std::process::id());
    assert!(row["process_started_at"].as_i64().unwrap() > 0);
    assert_eq!(row["assistant"], "Hello there");
    // The launch's get_state, answered before the prompt, told the session's name and count.
    assert_eq!(
        (&row["session_name"], &row["pending"]),
        (&json!("one run"), &json!(0))
    );
    // Any line makes the script exit 0.
    f.rt.call(&id, "get_state", json!({}), Duration::from_millis(200))
        .await
        .ok();
    f.closed(&id).await;
    let row = f.row(&id);
    assert_eq!(
        (
            row["status"].as_str(),
            row["phase"].as_str(),
            row["exit_kind"].as_str()
        ),
        (Some("closed"), Some("idle"), Some("exited"))
    );
    assert_eq!(row["exit_code"], 0);
    assert_eq!(row["stderr"], "warning: something\n");
    assert_eq!(
        f.event_types(&id),
        [
            "thread_started",
            "turn_started",
            "assistant_message",
            "thread_error",
            "turn_completed",
            "thread_closed"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_zero_exit_is_failed() {
    let f = fixture();
    let id = f.thread(2, "crash");
    let out =
        f.rt.launch(f.spec(&id, "echo boom >&2; exit 3", StartKind::Resumed))
            .await
            .unwrap();
    assert!(out.pid > 1);
    f.closed(&id).await;
    let row = f.row(&id);
    assert_eq!(
        (row["phase"].as_str(), row["exit_kind"].as_str()),
        (Some("failed"), Some("failed"))
    );
    // pi-threads' `classifyProcessExit`: only the known parts, so no "signal null".
    assert_eq!(row["exit_message"], "Child Pi process exited with code 3");
    let evs = events::of_thread(&f.store.read().unwrap(), &id).unwrap();
    assert_eq!(evs[0].kind, "thread_resumed");
    assert_eq!(evs.last().unwrap().data["exit"]["kind"], "failed");
    assert_eq!(
        evs.last().unwrap().data["exit"],
        json!({"kind": "failed", "message": "Child Pi process exited with code 3"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signalled_exit_is_failed_and_names_only_the_signal() {
    let f = fixture();
    let id = f.thread(2, "killed");
    f.rt.launch(f.spec(&id, "kill -KILL $$", StartKind::Resumed))
        .await
        .unwrap();
    f.closed(&id).await;
    let row = f.row(&id);
    assert_eq!(
        (row["phase"].as_str(), row["exit_kind"].as_str()),
        (Some("failed"), Some("failed"))
    );
    assert_eq!(
        row["exit_message"],
        "Child Pi process exited with signal SIGKILL"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_program_fails_cleanly() {
    let f = fixture();
    let id = f.thread(3, "missing");
    let mut spec = f.spec(&id, "", StartKind::Prompt("x".into()));
    spec.argv = vec!["/nonexistent/pi".into()];
    let err = f.rt.launch(spec).await.unwrap_err();
    assert_eq!(err.code, threadbase::ErrorCode::Io);
    assert!(
        err.message.contains("THREADBASE_PI_COMMAND") && err.message.contains("Repair:"),
        "{}",
        err.message
    );
    let row = f.row(&id);
    assert_eq!(
        (row["status"].as_str(), row["exit_kind"].as_str()),
        (Some("closed"), Some("failed"))
    );
    assert!(row["exit_message"]
        .as_str()
        .unwrap()
        .contains("/nonexistent/pi"));
}

/// Ignores SIGTERM and answers nothing, with a grandchild in its group.
const STUBBORN: &str = "trap '' TERM; sleep 1000 & while :; do sleep 0.05; done";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_stop_escalates_to_sigkill_of_the_group() {
    let f = fixture();
    let id = f.thread(4, "stubborn");
    let out =
        f.rt.launch(f.spec(&id, STUBBORN, StartKind::Resumed))
            .await
            .unwrap();
    // A resume that never got an answer to its get_state is not reported idle.
    assert!(
        out.note
            .as_deref()
            .is_some_and(|n| n.contains("it stays starting until it does")),
        "{out:?}"
    );
    assert_eq!(f.rt.watch(&id).unwrap().borrow().phase, Phase::Starting);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(group_has_members(out.pid));
    let started = std::time::Instant::now();
    assert!(f
        .rt
        .stop(&id, false, threadbase::runtime::StopBy::Caller)
        .await
        .unwrap());
    let took = started.elapsed();
    // abort (1.5 s) + SIGTERM wait (1.5 s) before SIGKILL.
    assert!(took >= Duration::from_millis(2900), "{took:?}");
    f.rt.flush().await;
    let row = f.row(&id);
    assert_eq!(
        (row["exit_kind"].as_str(), row["phase"].as_str()),
        (Some("stopped"), Some("idle"))
    );
    assert_eq!(row["exit_signal"], "SIGKILL");
    assert!(
        !group_has_members(out.pid),
        "the grandchild died with the group"
    );
    let types = f.event_types(&id);
    assert_eq!(
        &types[types.len() - 2..],
        ["thread_stopping", "thread_closed"]
    );
    // Stopping a closed thread is a no-op.
    assert!(!f
        .rt
        .stop(&id, false, threadbase::runtime::StopBy::Caller)
        .await
        .unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_stop_kills_at_once_and_sigterm_is_enough_for_a_polite_child() {
    let f = fixture();
    let id = f.thread(5, "forced");
    let out =
        f.rt.launch(f.spec(&id, STUBBORN, StartKind::Resumed))
            .await
            .unwrap();
    let started = std::time::Instant::now();
    f.rt.stop(&id, true, threadbase::runtime::StopBy::Caller)
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_millis(1000));
    f.rt.flush().await;
    assert_eq!(f.row(&id)["exit_kind"], "stopped");
    assert!(!group_has_members(out.pid));

    let id = f.thread(6, "polite");
    let out =
        f.rt.launch(f.spec(
            &id,
            "sleep 1000 & while :; do sleep 0.05; done",
            StartKind::Resumed,
        ))
        .await
        .unwrap();
    f.rt.stop(&id, false, threadbase::runtime::StopBy::Caller)
        .await
        .unwrap();
    f.rt.flush().await;
    let row = f.row(&id);
    assert_eq!(row["exit_kind"], "stopped");
    assert_eq!(row["exit_signal"], "SIGTERM");
    // SIGTERM reached the whole group; nothing is left.
    for _ in 0..20 {
        if !group_has_members(out.pid) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!group_has_members(out.pid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_every_live_child() {
    let f = fixture();
    let a = f.thread(7, "a");
    let b = f.thread(8, "b");
    let pa =
        f.rt.launch(f.spec(&a, "while :; do sleep 0.05; done", StartKind::Resumed))
            .await
            .unwrap()
            .pid;
    let pb =
        f.rt.launch(f.spec(&b, "while :; do sleep 0.05; done", StartKind::Resumed))
            .await
            .unwrap()
            .pid;
    f.rt.shutdown().await;
    assert!(!f.rt.is_live(&a) && !f.rt.is_live(&b));
    assert_eq!(f.row(&a)["exit_kind"], "stopped");
    assert_eq!(f.row(&b)["exit_kind"], "stopped");
    assert!(!group_has_members(pa) && !group_has_members(pb));
}

/// Found by tests/it/fuzz_serve.rs: a request that reached the runtime just after its child
/// closed (idle cleanup raced a `send`) was refused without a `Repair:` hint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_a_child_that_is_gone_has_a_repair_hint() {
    let f = fixture();
    let e =
        f.rt.call(
            &ThreadId::new("thread_000000000000"),
            "get_state",
            json!({}),
            Duration::from_secs(1),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, threadbase::ErrorCode::Closed);
    assert!(e.message.contains("Repair:"), "{}", e.message);
}
