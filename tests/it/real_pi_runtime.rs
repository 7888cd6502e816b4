//! The runtime driving real Pi 1.6 children against the loopback fake LLM: start with a
//! prompt that runs the built-in `bash` tool, steer and follow up while busy, abort, stop,
//! kill, and check the rows. Skips without Pi unless CI=true.

use crate::support::fake_llm;
use crate::support::runtime::RuntimeDb;

use std::time::Duration;

use fake_llm::{hermetic_pi_env, pi_or_skip, FakeLlm, PiEnv, Step};
use serde_json::{json, Value};
use threadbase::domain::ThreadId;
use threadbase::runtime::mapping::Phase;
use threadbase::runtime::{LaunchSpec, RuntimeConfig, SendMode, StartKind};

const RUN: Duration = Duration::from_secs(60);

struct World {
    db: RuntimeDb,
    env: PiEnv,
    pi: Vec<String>,
}

impl std::ops::Deref for World {
    type Target = RuntimeDb;
    fn deref(&self) -> &RuntimeDb {
        &self.db
    }
}

impl World {
    fn new(pi: Vec<String>, fake: &FakeLlm) -> World {
        World {
            db: RuntimeDb::new("ses_real_pi", RuntimeConfig::default()),
            env: hermetic_pi_env(fake),
            pi,
        }
    }

    fn spec(&self, n: u64, name: &str, start: StartKind) -> LaunchSpec {
        let id = self.starting_thread(n, name);
        let session = self.env.root.path().join(format!("{name}.jsonl"));
        let extra = ["--session", session.to_str().unwrap(), "--name", name];
        LaunchSpec {
            thread_id: id,
            argv: self.env.argv(&self.pi, &extra),
            cwd: self.env.cwd.clone(),
            env: self.env.env.clone(),
            clear_env: true,
            start,
        }
    }

    async fn phase(&self, id: &ThreadId, want: Phase) {
        let mut view = self.rt.watch(id).expect("live");
        tokio::time::timeout(RUN, view.wait_for(|v| v.phase == want))
            .await
            .unwrap_or_else(|_| panic!("{id} never reached {want:?}"))
            .unwrap();
        self.rt.flush().await;
    }

    fn row(&self, id: &ThreadId) -> Value {
        self.row_json(
            id,
            "'status', status, 'phase', phase, 'exit_kind', exit_kind, 'exit_code', exit_code,
             'exit_signal', exit_signal, 'pid', pid, 'assistant', o.last_assistant_text",
        )
    }
}

fn kinds(evs: &[(String, Value)]) -> Vec<&str> {
    evs.iter().map(|(k, _)| k.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_pi_runs_steers_follows_up_aborts_and_stops() {
    let Some(pi) = pi_or_skip("real_pi_runs_steers_follows_up_aborts_and_stops") else {
        return;
    };
    let fake = FakeLlm::with_script([
        // Run 1: a bash tool call, then an answer.
        Step::bash("echo hi-from-bash"),
        Step::text("First answer."),
        // Run 2: a slow answer, during which a steer and a follow-up arrive.
        Step::text_deltas(
            (0..15).map(|i| format!("w{i} ")),
            Duration::from_millis(100),
        ),
        Step::text("Steered answer."),
        Step::text("Follow-up answer."),
        // Run 3: hangs until aborted.
        Step::hang(30_000),
    ]);
    let w = World::new(pi, &fake);
    let spec = w.spec(
        1,
        "real",
        StartKind::Prompt("Run echo, then answer.".into()),
    );
    let id = spec.thread_id.clone();
    let out = w.rt.launch(spec).await.unwrap();
    assert_eq!(out.prompt_accepted, Some(true), "{out:?}");
    w.phase(&id, Phase::Idle).await;
    let row = w.row(&id);
    assert_eq!(
        (row["status"].as_str(), row["phase"].as_str()),
        (Some("live"), Some("idle"))
    );
    assert_eq!(row["assistant"], "First answer.");
    let evs = w.events(&id);
    let k = kinds(&evs);
    assert_eq!(k[0], "thread_started");
    assert_eq!(evs[0].1["pid"], out.pid);
    assert!(
        k.contains(&"tool_started") && k.contains(&"tool_completed"),
        "{k:?}"
    );
    let tool = evs.iter().find(|(k, _)| k == "tool_completed").unwrap();
    assert_eq!(tool.1, json!({"toolName": "bash", "error": false}));
    assert_eq!(
        k.iter().filter(|k| **k == "turn_started").count(),
        2,
        "{k:?}"
    );
    assert_eq!(
        k.iter().filter(|k| **k == "turn_completed").count(),
        2,
        "{k:?}"
    );
    let said = evs
        .iter()
        .rev()
        .find(|(k, _)| k == "assistant_message")
        .unwrap();
    assert_eq!(said.1["text"], "First answer.");
    // The tool really ran: its output went back to the model.
    let second = &fake.completion_requests()[1];
    assert!(second.body.contains("hi-from-bash"), "{}", second.body);

    // Run 2: prompt, then steer and follow up while busy.
    let sent =
        w.rt.send(&id, SendMode::Prompt, "Write slowly.")
            .await
            .unwrap();
    assert_eq!(sent.accepted, Some(true));
    fake.wait_for_requests(3, RUN);
    let steer =
        w.rt.send(&id, SendMode::Steer, "Steer: mention apples.")
            .await
            .unwrap();
    assert_eq!(steer.accepted, Some(true), "{steer:?}");
    let follow =
        w.rt.send(&id, SendMode::FollowUp, "Follow-up: mention pears.")
            .await
            .unwrap();
    assert_eq!(follow.accepted, Some(true), "{follow:?}");
    // A plain prompt while busy is rejected by Pi and reported, not thrown.
    let busy =
        w.rt.send(&id, SendMode::Prompt, "Plain prompt while busy.")
            .await
            .unwrap();
    assert_eq!(busy.accepted, Some(false));
    assert!(busy.error.unwrap().contains("already processing"));
    w.phase(&id, Phase::Idle).await;
    let reqs = fake.completion_requests();
    assert_eq!(
        reqs.len(),
        5,
        "steer and follow-up each took one more model call"
    );
    assert_eq!(
        reqs[3].last_user_text().as_deref(),
        Some("Steer: mention apples.")
    );
    assert_eq!(
        reqs[4].last_user_text().as_deref(),
        Some("Follow-up: mention pears.")
    );
    assert_eq!(w.row(&id)["assistant"], "Follow-up answer.");

    // Run 3: abort a hanging request; the thread stays live and idle.
    w.rt.send(&id, SendMode::Prompt, "Hang.").await.unwrap();
    fake.wait_for_requests(6, RUN);
    let aborted =
        w.rt.call(&id, "abort", json!({}), Duration::from_secs(5))
            .await
            .unwrap();
    assert!(aborted.success);
    w.phase(&id, Phase::Idle).await;
    let (idle, state) = w.rt.refresh(&id, Duration::from_secs(5)).await.unwrap();
    assert!(idle, "{state}");
    assert_eq!(state["isStreaming"], false);

    // Graceful stop: abort, SIGTERM; Pi exits 143 and the exit reads stopped.
    assert!(w
        .rt
        .stop(&id, false, threadbase::runtime::StopBy::Caller)
        .await
        .unwrap());
    w.rt.flush().await;
    let row = w.row(&id);
    assert_eq!(
        (
            row["status"].as_str(),
            row["exit_kind"].as_str(),
            row["phase"].as_str()
        ),
        (Some("closed"), Some("stopped"), Some("idle"))
    );
    let evs = w.events(&id);
    assert_eq!(
        &kinds(&evs)[evs.len() - 2..],
        ["thread_stopping", "thread_closed"]
    );

    // A killed child (not stopped by us) is failed, with the signal.
    let spec = w.spec(2, "killed", StartKind::Prompt("Hang again.".into()));
    let id2 = spec.thread_id.clone();
    fake.push(Step::hang(30_000));
    let out = w.rt.launch(spec).await.unwrap();
    fake.wait_for_requests(7, RUN);
    threadbase::runtime::signals::signal_group(
        out.pid,
        threadbase::runtime::signals::GroupSignal::Kill,
    );
    let mut view = w.rt.watch(&id2).unwrap();
    tokio::time::timeout(RUN, view.wait_for(|v| v.closed))
        .await
        .unwrap()
        .unwrap();
    w.rt.flush().await;
    let row = w.row(&id2);
    assert_eq!(
        (
            row["exit_kind"].as_str(),
            row["exit_signal"].as_str(),
            row["phase"].as_str()
        ),
        (Some("failed"), Some("SIGKILL"), Some("failed"))
    );

    assert!(
        w.env.leftover_processes().is_empty(),
        "no Pi process or tool survives"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_pi_resume_has_no_prompt_and_force_stop_kills() {
    let Some(pi) = pi_or_skip("real_pi_resume_has_no_prompt_and_force_stop_kills") else {
        return;
    };
    let fake = FakeLlm::with_script([Step::text("Hello.")]);
    let w = World::new(pi, &fake);
    let spec = w.spec(1, "first", StartKind::Prompt("Say hello.".into()));
    let id = spec.thread_id.clone();
    let (argv, session) = (spec.argv.clone(), w.env.root.path().join("first.jsonl"));
    w.rt.launch(spec).await.unwrap();
    w.phase(&id, Phase::Idle).await;
    w.rt.stop(&id, true, threadbase::runtime::StopBy::Caller)
        .await
        .unwrap();
    w.rt.flush().await;
    assert_eq!(w.row(&id)["exit_kind"], "stopped");
    assert!(session.exists(), "Pi wrote its session file");

    // Resume the same session: no prompt is sent, the thread is idle at once.
    let spec = LaunchSpec {
        thread_id: id.clone(),
        argv,
        cwd: w.env.cwd.clone(),
        env: w.env.env.clone(),
        clear_env: true,
        start: StartKind::Resumed,
    };
    w.rt.launch(spec).await.unwrap();
    w.phase(&id, Phase::Idle).await;
    assert_eq!(fake.completion_requests().len(), 1, "resume sent no prompt");
    let (idle, state) = w.rt.refresh(&id, Duration::from_secs(5)).await.unwrap();
    assert!(
        idle,
        "a refresh after the resume reads idle (issue 13): {state}"
    );
    assert!(
        state["messageCount"].as_u64().unwrap() >= 2,
        "the resumed session has its history: {state}"
    );
    let evs = w.events(&id);
    assert!(kinds(&evs).contains(&"thread_resumed"));
    w.rt.shutdown().await;
    assert!(w.env.leftover_processes().is_empty());
}

/// The user texts of a Pi session file, in file order.
fn user_texts(file: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "user")
        .map(|e| fake_llm::content_text(&e["message"]["content"]))
        .collect()
}

/// Pi 1.6 checks whether it is busy only after a prompt's asynchronous preflight: a second
/// prompt written before the first is answered is also answered `started` and then dropped
/// (verified). The runtime writes one prompt at a time, so a follow-up sent while the launch
/// prompt is unanswered (Pi still booting) and two follow-ups sent at once all run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_pi_messages_sent_before_an_answer_are_not_lost() {
    let Some(pi) = pi_or_skip("real_pi_messages_sent_before_an_answer_are_not_lost") else {
        return;
    };
    let fake = FakeLlm::with_script([
        Step::text("Start reply."),
        Step::text("Early follow-up reply."),
        Step::text("Reply A."),
        Step::text("Reply B."),
    ]);
    let w = World::new(pi, &fake);
    let spec = w.spec(1, "early", StartKind::Prompt("Start.".into()));
    let id = spec.thread_id.clone();
    let session = w.env.root.path().join("early.jsonl");
    // The follow-up is written while Pi boots, right after the launch prompt.
    let (launched, sent) = tokio::join!(w.rt.launch(spec), async {
        while !w.rt.is_live(&id) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        w.rt.send(&id, SendMode::FollowUp, "Early follow-up.").await
    });
    assert_eq!(launched.unwrap().prompt_accepted, Some(true));
    assert_eq!(sent.unwrap().accepted, Some(true));
    let deadline = std::time::Instant::now() + RUN;
    while fake.completion_requests().len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the follow-up never reached the model: {:?}",
            user_texts(&session)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    w.phase(&id, Phase::Idle).await;
    assert_eq!(w.row(&id)["assistant"], "Early follow-up reply.");
    assert_eq!(user_texts(&session), ["Start.", "Early follow-up."]);

    // Two follow-ups at once to the idle thread: the first starts a run, the second joins it.
    let (a, b) = tokio::join!(
        w.rt.send(&id, SendMode::FollowUp, "A."),
        w.rt.send(&id, SendMode::FollowUp, "B.")
    );
    assert_eq!(
        (a.unwrap().accepted, b.unwrap().accepted),
        (Some(true), Some(true))
    );
    while fake.completion_requests().len() < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "a follow-up never reached the model: {:?}",
            user_texts(&session)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    w.phase(&id, Phase::Idle).await;
    let (idle, state) = w.rt.refresh(&id, Duration::from_secs(5)).await.unwrap();
    assert!(idle, "{state}");
    let texts = user_texts(&session);
    assert_eq!(texts.len(), 4, "{texts:?}");
    assert!(
        texts.contains(&"A.".into()) && texts.contains(&"B.".into()),
        "{texts:?}"
    );
    w.rt.shutdown().await;
    assert!(w.env.leftovers_after(Duration::from_secs(5)).is_empty());
}
