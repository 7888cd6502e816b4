//! Issue 13, item 4: the actions whose outcome depends on what Pi 1.6 does in each phase, with
//! real Pi children against the loopback fake LLM, through `threadbase serve`:
//! - contract A: `send` while starting (a follow-up Pi would drop if written before it answered
//!   the launch prompt), steer and follow-up while busy, steer and follow-up while idle; `fork`
//!   of a busy thread; `stop` while starting, and twice at once while busy; `resume` after a
//!   stop mid-run;
//! - contract B: `agent_steer` of a completed (settled, retired) thread; `agent_stop` and a
//!   SIGKILL while a run starts (Pi still booting);
//! - contract C: `threads_interrupt` of a busy worker, then `threads_send`; `threads_interrupt`
//!   while a worker starts.
//!
//! Each model reply is routed by the last user message, so the order Pi asks in does not
//! matter. Skips without Pi unless CI=true.

use crate::support::{common, fake_llm, serve_client};

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fake_llm::{hermetic_pi_env, pi_or_skip, FakeLlm, PiEnv, Step};
use serde_json::{json, Value};
use serve_client::{serve_with_pi_children, session_user_texts, top_status, Serve, ServeSpec};

const WAIT_MS: u64 = 60_000;

/// The next completion request whose last user message contains `needle` gets `step`.
fn reply_to(fake: &FakeLlm, needle: &'static str, step: Step) {
    fake.route(
        move |r| r.last_user_text().is_some_and(|t| t.contains(needle)),
        step,
    );
}

/// Real Pi (`None`: skip `test`), a fake LLM that answers each needle of `replies` with its
/// step (see [`reply_to`]), and a hermetic environment for it.
fn pi_with_replies(
    test: &str,
    replies: Vec<(&'static str, Step)>,
) -> Option<(Vec<String>, FakeLlm, PiEnv)> {
    let pi = pi_or_skip(test)?;
    let fake = FakeLlm::start();
    for (needle, step) in replies {
        reply_to(&fake, needle, step);
    }
    let env = hermetic_pi_env(&fake);
    Some((pi, fake, env))
}

/// A reply streamed slowly enough (about `ms`) for actions to land while it runs.
fn slow(text: &str, ms: u64) -> Step {
    let words: Vec<String> = text.split_inclusive(' ').map(str::to_string).collect();
    let each = ms / words.len().max(1) as u64;
    Step::text_deltas(words, Duration::from_millis(each))
}

/// How many completion requests asked about `needle` (as the last user message).
fn asked(fake: &FakeLlm, needle: &str) -> usize {
    fake.completion_requests()
        .iter()
        .filter(|r| r.last_user_text().is_some_and(|t| t.contains(needle)))
        .count()
}

fn details(r: &Value) -> &Value {
    &r["details"]
}

/// A `thread` serve whose children are real Pi, with a parent session file.
fn thread_serve(env: &PiEnv, pi: &[String]) -> Serve {
    let sessions = env.agent_dir.join("sessions").join("parent");
    std::fs::create_dir_all(&sessions).unwrap();
    let parent = sessions.join("parent.jsonl");
    std::fs::write(
        &parent,
        format!("{}\n", json!({"type":"session","version":3,"id":"ses_phases","timestamp":"2026-11-30T00:00:00.000Z","cwd":env.cwd})),
    )
    .unwrap();
    let mut vars = env.env.clone();
    vars.push((
        "THREADBASE_PI_COMMAND".into(),
        serde_json::to_string(&env.child_command(pi, &[])).unwrap(),
    ));
    Serve::start(ServeSpec {
        db: &env.root.path().join("db.sqlite"),
        args: vec![
            "--session-file".into(),
            parent.display().to_string(),
            "--cwd".into(),
            env.cwd.display().to_string(),
        ],
        env: vars,
        cwd: env.cwd.clone(),
        clear_env: true,
    })
}

/// Sends `start` without waiting for its answer; returns the request id once the thread's
/// row exists (the launch is then still waiting for Pi, which takes about a second to boot).
fn start_without_waiting(s: &mut Serve, task: &str, prompt: &str) -> u64 {
    let req = s.send(
        "thread",
        json!({"action": "start", "prompt": prompt, "taskName": task}),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let list = s.thread(json!({"action": "list"}));
        if details(&list)["threads"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["taskName"] == task))
        {
            return req;
        }
        assert!(Instant::now() < deadline, "{task} never appeared: {list}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn wait_for(s: &mut Serve, id: &str) -> Value {
    let r = s.thread(json!({"action": "wait", "id": id, "timeoutMs": WAIT_MS}));
    assert_eq!(details(&r)["timedOut"], false, "{r}");
    assert_eq!(details(&r)["snapshot"]["phase"], "idle", "{r}");
    r
}

fn session_of(r: &Value) -> String {
    details(r)["snapshot"]["session"]["file"]
        .as_str()
        .unwrap()
        .to_string()
}

fn close(mut s: Serve, env: &PiEnv) {
    assert!(s.close(Duration::from_secs(30)).success());
    let left = env.leftovers_after(Duration::from_secs(10));
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn contract_a_send_while_starting_busy_and_idle() {
    let replies = vec![
        ("Begin", slow("Begun. ", 600)),
        ("Early", Step::text("Early reply.")),
        ("Next", slow("Working on next step now. ", 2_000)),
        ("Steer", Step::text("Steered reply.")),
        ("Follow", Step::text("Follow reply.")),
        ("Idle steer", Step::text("Idle steer reply.")),
        ("Idle follow", Step::text("Idle follow reply.")),
    ];
    let test = "contract_a_send_while_starting_busy_and_idle";
    let Some((pi, fake, env)) = pi_with_replies(test, replies) else {
        return;
    };
    let mut s = thread_serve(&env, &pi);

    // Starting: the default mode is follow_up; Pi has not answered the launch prompt yet.
    let start = start_without_waiting(&mut s, "phases", "Begin");
    let r = s.thread(json!({"action": "send", "id": "phases", "message": "Early"}));
    assert_eq!(
        (
            details(&r)["mode"].as_str(),
            details(&r)["accepted"].as_bool()
        ),
        (Some("follow_up"), Some(true)),
        "{r}"
    );
    let started = s.response(start, Duration::from_secs(60));
    // null: not answered within the launch's 4 s (a loaded machine); it runs all the same.
    assert_ne!(
        started["result"]["details"]["promptAccepted"], false,
        "{started}"
    );
    let r = wait_for(&mut s, "phases");
    assert_eq!(
        details(&r)["snapshot"]["resultSummary"],
        "Early reply.",
        "{r}"
    );
    let file = session_of(&r);
    assert_eq!(session_user_texts(Path::new(&file)), ["Begin", "Early"]);

    // Busy: a steer and a follow-up join the running turn; the wait returns after both.
    let r = s.thread(json!({"action": "send", "id": "phases", "message": "Next"}));
    assert_eq!(details(&r)["mode"], "prompt", "{r}");
    for (mode, message) in [("steer", "Steer"), ("follow_up", "Follow")] {
        let r =
            s.thread(json!({"action": "send", "id": "phases", "message": message, "mode": mode}));
        assert_eq!(details(&r)["accepted"], true, "{r}");
        assert_eq!(details(&r)["snapshot"]["phase"], "busy", "{r}");
    }
    let r = wait_for(&mut s, "phases");
    assert_eq!(
        details(&r)["snapshot"]["resultSummary"],
        "Follow reply.",
        "{r}"
    );

    // Idle: steer and follow_up start a run like a prompt.
    for (mode, message, reply) in [
        ("steer", "Idle steer", "Idle steer reply."),
        ("follow_up", "Idle follow", "Idle follow reply."),
    ] {
        let r =
            s.thread(json!({"action": "send", "id": "phases", "message": message, "mode": mode}));
        assert_eq!(details(&r)["accepted"], true, "{r}");
        let r = wait_for(&mut s, "phases");
        assert_eq!(details(&r)["snapshot"]["resultSummary"], reply, "{r}");
    }
    assert_eq!(
        session_user_texts(Path::new(&file)),
        [
            "Begin",
            "Early",
            "Next",
            "Steer",
            "Follow",
            "Idle steer",
            "Idle follow"
        ]
    );
    for needle in [
        "Early",
        "Next",
        "Steer",
        "Follow",
        "Idle steer",
        "Idle follow",
    ] {
        assert_eq!(asked(&fake, needle), 1, "{needle}");
    }
    close(s, &env);
}

#[test]
fn contract_a_fork_stop_and_resume_while_busy_and_starting() {
    let replies = vec![
        ("Work slowly", Step::hang(60_000)),
        ("In the fork", Step::text("Fork reply.")),
        ("After the stop", Step::text("Resumed reply.")),
    ];
    let test = "contract_a_fork_stop_and_resume_while_busy_and_starting";
    let Some((pi, fake, env)) = pi_with_replies(test, replies) else {
        return;
    };
    let mut s = thread_serve(&env, &pi);

    let r = s.thread(json!({"action": "start", "prompt": "Work slowly", "taskName": "busy"}));
    // "starting" when a loaded machine keeps Pi from answering within the launch's 4 s.
    assert!(
        matches!(
            details(&r)["snapshot"]["phase"].as_str(),
            Some("busy" | "starting")
        ),
        "{r}"
    );
    fake.wait_for_requests(1, Duration::from_secs(30));

    // Fork of the busy thread: the branch is idle at once and answers on its own.
    let r = s.thread(json!({"action": "fork", "id": "busy", "taskName": "busy_fork"}));
    s.expect_launched_idle(&r, "busy_fork");
    s.wait_idle_at_once("busy_fork", WAIT_MS);
    let r = s.thread(json!({"action": "send", "id": "busy_fork", "message": "In the fork"}));
    assert_eq!(details(&r)["accepted"], true, "{r}");
    let r = wait_for(&mut s, "busy_fork");
    assert_eq!(
        details(&r)["snapshot"]["resultSummary"],
        "Fork reply.",
        "{r}"
    );

    // Two stops at once of the busy thread: one stop, both answered.
    let a = s.send("thread", json!({"action": "stop", "id": "busy"}));
    let b = s.send("thread", json!({"action": "stop", "id": "busy"}));
    for req in [a, b] {
        let r = s.response(req, Duration::from_secs(30));
        assert_eq!(
            r["result"]["details"]["snapshot"]["exit"]["kind"], "stopped",
            "{r}"
        );
    }
    // Resumed after a stop mid-run: idle at once, then it answers.
    let r = s.thread(json!({"action": "resume", "id": "busy"}));
    s.expect_launched_idle(&r, "busy");
    s.wait_idle_at_once("busy", WAIT_MS);
    let r = s.thread(json!({"action": "send", "id": "busy", "message": "After the stop"}));
    assert_eq!(details(&r)["accepted"], true, "{r}");
    let r = wait_for(&mut s, "busy");
    assert_eq!(
        details(&r)["snapshot"]["resultSummary"],
        "Resumed reply.",
        "{r}"
    );

    // Stop while starting: the launch ends, the thread is stopped, nothing is left running.
    let start = start_without_waiting(&mut s, "starter", "Never asked");
    let r = s.thread(json!({"action": "stop", "id": "starter"}));
    assert_eq!(details(&r)["snapshot"]["exit"]["kind"], "stopped", "{r}");
    let started = s.response(start, Duration::from_secs(60));
    assert!(started.get("result").is_some(), "{started}");
    let r = s.thread(json!({"action": "poll", "id": "starter"}));
    assert_eq!(details(&r)["snapshot"]["status"], "closed", "{r}");
    close(s, &env);
}

/// A serve for session `session` whose children are real Pi with the `tools` of the
/// extension; and its database.
fn tools_serve(env: &PiEnv, pi: &[String], tools: &str, session: &str) -> (PathBuf, Serve) {
    let db = env.root.path().join("db.sqlite");
    let s = serve_with_pi_children(
        &db,
        &env.env,
        &env.cwd,
        &env.child_command(pi, &[]),
        tools,
        session,
    );
    (db, s)
}

/// A contract B call's details.
fn agent_call(s: &mut Serve, method: &str, params: Value) -> Value {
    let id = s.send(method, params.clone());
    let r = s.response(id, Duration::from_secs(120));
    assert!(r.get("error").is_none(), "{method} {params}: {r}");
    r["result"]["details"].clone()
}

#[test]
fn contract_b_steer_of_a_completed_thread_runs_on_its_session() {
    let replies = vec![
        ("TASK", Step::text("Task done.")),
        ("STEER", Step::text("Steer done.")),
    ];
    let test = "contract_b_steer_of_a_completed_thread_runs_on_its_session";
    let Some((pi, fake, env)) = pi_with_replies(test, replies) else {
        return;
    };
    let (db, mut s) = tools_serve(&env, &pi, "agent", "ses_phases_b");
    let v = agent_call(
        &mut s,
        "agent_spawn",
        json!({"path": "worker", "type": "worker", "task": "TASK: say done"}),
    );
    assert_eq!(
        (v["state"].as_str(), v["output"].as_str()),
        (Some("completed"), Some("Task done.")),
        "{v}"
    );
    let file = v["sessionFile"].as_str().unwrap().to_string();
    // The settled run's process is retired; a steer starts a new one on the same session.
    until_row::<String>(
        &db,
        "SELECT status FROM threads WHERE path = '/root/worker' AND status = 'closed'",
        &[],
        "the settled process was not retired",
    );
    agent_call(
        &mut s,
        "agent_steer",
        json!({"path": "/root/worker", "message": "STEER: once more"}),
    );
    let v = agent_call(
        &mut s,
        "agent_wait",
        json!({"path": "/root/worker", "timeoutMs": WAIT_MS}),
    );
    assert_eq!(
        (v["state"].as_str(), v["output"].as_str()),
        (Some("completed"), Some("Steer done.")),
        "{v}"
    );
    assert_eq!(v["sessionFile"], file.as_str());
    let texts = session_user_texts(Path::new(&file));
    assert_eq!(texts, ["TASK: say done", "STEER: once more"]);
    assert_eq!((asked(&fake, "TASK"), asked(&fake, "STEER")), (1, 1));
    // The resumed transcript's context went to the model: the first answer is in it.
    let last = fake.completion_requests().pop().unwrap();
    assert!(last.body.contains("Task done."), "{}", last.body);
    close(s, &env);
}

/// The value `sql` reads (a row of one column) once it reads one that is not NULL: read every
/// 5 ms, for at most 30 s.
fn until_row<T: rusqlite::types::FromSql>(
    db: &Path,
    sql: &str,
    params: &[&dyn rusqlite::ToSql],
    what: &str,
) -> T {
    let every = Duration::from_millis(5);
    common::poll(Duration::from_secs(30), every, what, || {
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.busy_timeout(Duration::from_secs(5)).unwrap();
        conn.query_row(sql, params, |r| r.get::<_, Option<T>>(0))
            .unwrap_or(None)
    })
}

#[test]
fn contract_b_stop_or_crash_while_starting_settles_the_thread() {
    let test = "contract_b_stop_or_crash_while_starting_settles_the_thread";
    let Some((pi, _fake, env)) = pi_with_replies(test, vec![("EARLY", Step::hang(60_000))]) else {
        return;
    };
    let (db, mut s) = tools_serve(&env, &pi, "agent", "ses_phases_b_stop");
    // The stop lands while Pi boots, before it answered the launch prompt.
    let spawn = s.send(
        "agent_spawn",
        json!({"path": "early", "type": "worker", "task": "EARLY: take long", "wait": false}),
    );
    until_row::<String>(
        &db,
        "SELECT status FROM threads WHERE path = '/root/early' AND status = 'live'",
        &[],
        "the run never started",
    );
    let v = agent_call(&mut s, "agent_stop", json!({"path": "/root/early"}));
    assert_eq!(v["state"], "stopped", "{v}");
    let r = s.response(spawn, Duration::from_secs(60));
    assert!(r.get("result").is_some(), "{r}");
    let v = agent_call(
        &mut s,
        "agent_wait",
        json!({"path": "/root/early", "timeoutMs": 20_000}),
    );
    assert_eq!(
        (v["state"].as_str(), v["status"].as_str()),
        (Some("stopped"), Some("Stopped; session retained")),
        "{v}"
    );
    // The stopped run keeps its aborted run's error, as the original's does.
    assert_eq!(v["error"], "Subagent run aborted", "{v}");

    // A child killed while it boots never answers its launch prompt: the run still settles
    // (failed), so a wait returns.
    let spawn = s.send(
        "agent_spawn",
        json!({"path": "doomed", "type": "worker", "task": "EARLY: crash", "wait": false}),
    );
    let pid: i64 = until_row(
        &db,
        "SELECT pid FROM threads WHERE path = '/root/doomed' AND status = 'live'",
        &[],
        "the run never started",
    );
    rustix::process::kill_process_group(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let r = s.response(spawn, Duration::from_secs(60));
    assert!(r.get("result").is_some(), "{r}");
    let v = agent_call(
        &mut s,
        "agent_wait",
        json!({"path": "/root/doomed", "timeoutMs": 20_000}),
    );
    assert_eq!(v["state"], "failed", "{v}");
    assert!(
        v["error"].as_str().is_some_and(|e| e.contains("SIGKILL")),
        "{v}"
    );
    // A failed thread's status is its error text.
    assert_eq!(v["status"], v["error"], "{v}");
    close(s, &env);
}

#[test]
fn contract_c_interrupt_of_a_busy_worker_then_send() {
    let replies = vec![
        ("Long task", Step::hang(60_000)),
        ("Short task", Step::text("Short done.")),
        ("Early task", slow("Early task finished after all. ", 3_000)),
    ];
    let test = "contract_c_interrupt_of_a_busy_worker_then_send";
    let Some((pi, fake, env)) = pi_with_replies(test, replies) else {
        return;
    };
    let (db, mut s) = tools_serve(&env, &pi, "worker", "ses_phases_c");
    let tool = |s: &mut Serve, method: &str, params: Value| agent_call(s, method, params);
    let v = tool(
        &mut s,
        "threads_spawn",
        json!({"key": "long", "title": "Long", "directory": env.cwd.display().to_string(), "task": "Long task"}),
    );
    let worker = v["workerID"].as_str().unwrap().to_string();
    fake.wait_for_requests(1, Duration::from_secs(30));
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(top_status(&db, &list, &worker), "running", "{list}");

    let v = tool(&mut s, "threads_interrupt", json!({"workerID": worker}));
    assert_eq!(v["outcome"], "interrupted", "{v}");
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(top_status(&db, &list, &worker), "interrupted", "{list}");

    tool(
        &mut s,
        "threads_send",
        json!({"workerID": worker, "key": "short", "text": "Short task"}),
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = tool(&mut s, "threads_list", json!({}));
        // Succeeded without a report: listed "no report".
        if list["workers"][0]["outcome"] == "succeeded" {
            assert_eq!(top_status(&db, &list, &worker), "no report", "{list}");
            break;
        }
        assert!(Instant::now() < deadline, "never succeeded: {list}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(asked(&fake, "Short task"), 1);

    // Interrupted while Pi boots, before it answered the launch prompt: Pi would answer an
    // abort written then at once and run the prompt anyway; the interrupt still holds.
    let spawn = s.send(
        "threads_spawn",
        json!({"key": "early", "title": "Early", "directory": env.cwd.display().to_string(), "task": "Early task"}),
    );
    let early: String = until_row(
        &db,
        "SELECT id FROM threads WHERE id <> ?1 AND status = 'live'",
        &[&worker],
        "the early worker never started",
    );
    let v = tool(&mut s, "threads_interrupt", json!({"workerID": early}));
    assert_eq!(v["outcome"], "interrupted", "{v}");
    let r = s.response(spawn, Duration::from_secs(60));
    assert!(r.get("result").is_some(), "{r}");
    std::thread::sleep(Duration::from_millis(3_500));
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(
        top_status(&db, &list, &early),
        "interrupted",
        "the run did not go on: {list}"
    );
    close(s, &env);
}
