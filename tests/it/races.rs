//! The rules that check before they write hold with writers on two hosts racing (issue 46
//! item 4): a path reserved once per manager, the live limit and the queue per session, a
//! tree's thread cap, spawn keys per coordinator. On SQLite every write holds the file; on
//! PostgreSQL (these tests run on both: `races::` is in the PostgreSQL pass's modules) a
//! serve's writes take its tree's lock and nothing wider, so two serves of one tree on two
//! hosts must take turns at exactly these checks.
//!
//! Each test starts two serves of one session, on `host-a` and `host-b`, sends both their
//! requests before reading any answer, and counts what the database kept.

use crate::support::serve_client::{Scripted, Serve};
use crate::support::sql::count;

use std::time::Duration;

use serde_json::{json, Value};

const ANSWER: Duration = Duration::from_secs(90);

fn base(name: &str) -> Scripted {
    let base = Scripted::new(name);
    base.script("script", &json!({"default_reply": "done"}).to_string());
    base
}

/// Serves of session `ses_race` on host-a and host-b, with `env`.
fn two_hosts(base: &Scripted, env: &[(&str, &str)]) -> (Serve, Serve) {
    let serve = |host: &str| {
        let mut all = vec![("THREADBASE_HOST_ID", host)];
        all.extend_from_slice(env);
        let mut s = base.serve(
            "script",
            vec!["--session-id".into(), "ses_race".into()],
            &all,
        );
        // The serve is up (its restore pass done) before the race begins.
        s.thread(json!({"action": "list"}));
        s
    };
    (serve("host-a"), serve("host-b"))
}

/// Sends every request of `each` to both serves (all of host-a's, then all of host-b's,
/// none waiting for an answer); the answers, host-a's first.
fn race(a: &mut Serve, b: &mut Serve, each: &[Value]) -> Vec<Value> {
    let on_a: Vec<u64> = each.iter().map(|p| a.send("thread", p.clone())).collect();
    let on_b: Vec<u64> = each.iter().map(|p| b.send("thread", p.clone())).collect();
    let mut answers: Vec<Value> = on_a.into_iter().map(|id| a.response(id, ANSWER)).collect();
    answers.extend(on_b.into_iter().map(|id| b.response(id, ANSWER)));
    answers
}

fn close(mut a: Serve, mut b: Serve) {
    a.close(Duration::from_secs(30));
    b.close(Duration::from_secs(30));
}

/// Every answer is a result or an error of `code` whose message starts with `starts`
/// (never a constraint's refusal); the number of results.
fn results_else(answers: &[Value], code: &str, starts: &str) -> usize {
    let mut ok = 0;
    for r in answers {
        if r.get("result").is_some() {
            ok += 1;
            continue;
        }
        let e = &r["error"];
        let message = e["message"].as_str().unwrap_or_default();
        assert!(
            e["code"] == code && message.starts_with(starts) && message.contains("Repair:"),
            "want a result or a {code} error starting {starts:?}: {r}"
        );
    }
    ok
}

/// A path is reserved once per manager: each round, both hosts start the same task name at
/// once; one start takes it and the other is refused with the contract's text. Starts without
/// a name get distinct generated paths.
#[test]
fn two_hosts_starting_one_task_name_at_once_reserve_it_once() {
    let base = base("race_path");
    let (mut a, mut b) = two_hosts(&base, &[("PI_THREADS_MAX_THREADS", "64")]);
    let named: Vec<Value> = (0..6)
        .map(|i| json!({"action": "start", "prompt": "go", "taskName": format!("t{i}")}))
        .collect();
    let answers = race(&mut a, &mut b, &named);
    let started = results_else(&answers, "conflict", "Thread path already exists: /root/t");
    assert_eq!(started, 6, "each name once: {answers:?}");
    let unnamed: Vec<Value> = (0..4)
        .map(|_| json!({"action": "start", "prompt": "same words"}))
        .collect();
    let answers = race(&mut a, &mut b, &unnamed);
    assert_eq!(results_else(&answers, "conflict", "-"), 8, "{answers:?}");
    assert_eq!(count(&base.db, "SELECT count(*) FROM threads"), 14);
    assert_eq!(
        count(&base.db, "SELECT count(DISTINCT path) FROM threads"),
        14,
        "no path twice"
    );
    close(a, b);
}

/// The live limit holds per session: with 3 slots, eight starts racing on two hosts make three
/// live threads and five refusals; with the queue on, three live and five queued, in one line
/// of distinct paths.
#[test]
fn two_hosts_starting_at_once_never_pass_the_sessions_live_limit() {
    let base = base("race_limit");
    let (mut a, mut b) = two_hosts(&base, &[("PI_THREADS_MAX_THREADS", "3")]);
    let starts: Vec<Value> = (0..4)
        .map(|_| json!({"action": "start", "prompt": "go"}))
        .collect();
    let answers = race(&mut a, &mut b, &starts);
    assert_eq!(
        results_else(
            &answers,
            "limit",
            "pi-threads live thread limit reached: 3/3"
        ),
        3,
        "{answers:?}"
    );
    assert_eq!(count(&base.db, "SELECT count(*) FROM threads"), 3);
    close(a, b);

    let base = self::base("race_queue");
    let (mut a, mut b) = two_hosts(
        &base,
        &[
            ("PI_THREADS_MAX_THREADS", "3"),
            ("THREADBASE_QUEUE", "1"),
            // Idle threads keep their slots: what is counted is what the race left.
            ("THREADBASE_QUEUE_IDLE_MS", "600000"),
        ],
    );
    let answers = race(&mut a, &mut b, &starts);
    assert_eq!(results_else(&answers, "none", "-"), 8, "{answers:?}");
    assert_eq!(
        count(
            &base.db,
            "SELECT count(*) FROM threads WHERE status = 'live' AND phase <> 'queued'"
        ),
        3,
        "three slots taken"
    );
    assert_eq!(
        count(
            &base.db,
            "SELECT count(*) FROM threads WHERE phase = 'queued'"
        ),
        5
    );
    assert_eq!(
        count(&base.db, "SELECT count(DISTINCT path) FROM threads"),
        8,
        "no path twice"
    );
    close(a, b);
}

/// A tree's thread cap (`THREADBASE_MAX_TREE_THREADS`) holds with both hosts starting at once.
#[test]
fn two_hosts_starting_at_once_never_pass_the_trees_thread_cap() {
    let base = base("race_tree_cap");
    let (mut a, mut b) = two_hosts(
        &base,
        &[
            ("PI_THREADS_MAX_THREADS", "64"),
            ("THREADBASE_MAX_TREE_THREADS", "5"),
        ],
    );
    let starts: Vec<Value> = (0..4)
        .map(|_| json!({"action": "start", "prompt": "go"}))
        .collect();
    let answers = race(&mut a, &mut b, &starts);
    assert_eq!(
        results_else(&answers, "limit", "Thread limit reached for the tree"),
        5,
        "{answers:?}"
    );
    assert_eq!(count(&base.db, "SELECT count(*) FROM threads"), 5);
    close(a, b);
}

/// Spawn keys are one per coordinator: both hosts spawn the same three keys at once; each key
/// makes one worker, launched once, and both hosts answer with its id.
#[test]
fn two_hosts_spawning_the_same_keys_at_once_make_one_worker_each() {
    let base = base("race_spawn_key");
    let (mut a, mut b) = two_hosts(&base, &[]);
    let spawns: Vec<Value> = ["review", "docs", "tests"]
        .iter()
        .map(|k| json!({"key": k, "title": k, "directory": base.root, "task": "Check"}))
        .collect();
    let on_a: Vec<u64> = spawns
        .iter()
        .map(|p| a.send("threads_spawn", p.clone()))
        .collect();
    let on_b: Vec<u64> = spawns
        .iter()
        .map(|p| b.send("threads_spawn", p.clone()))
        .collect();
    for (ida, idb) in on_a.into_iter().zip(on_b) {
        let (ra, rb) = (a.response(ida, ANSWER), b.response(idb, ANSWER));
        let worker = &ra["result"]["details"]["workerID"];
        assert!(worker.is_string(), "{ra}");
        assert_eq!(&rb["result"]["details"]["workerID"], worker, "{rb}");
    }
    assert_eq!(
        count(
            &base.db,
            "SELECT count(*) FROM threads WHERE coordinator_id IS NOT NULL"
        ),
        3
    );
    assert_eq!(
        count(
            &base.db,
            "SELECT count(*) FROM threads WHERE launch_seq = 1"
        ),
        3,
        "each launched once"
    );
    close(a, b);
}

/// A team budget holds across trees: once reached, starts racing in two trees on two hosts
/// are all refused and write nothing; raised, they all go through (on PostgreSQL each start
/// takes the team budget's lock beside its own tree's).
#[test]
fn two_trees_on_two_hosts_starting_at_once_keep_to_the_team_budget() {
    let base = base("race_team_budget");
    let serve = |session: &str, host: &str| {
        let mut s = base.serve(
            "script",
            vec!["--session-id".into(), session.into()],
            &[("THREADBASE_HOST_ID", host)],
        );
        s.thread(json!({"action": "list"}));
        s
    };
    let (mut a, mut b) = (serve("ses_tree_a", "host-a"), serve("ses_tree_b", "host-b"));
    let budget = |tokens: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(&base.db)
            .args(["budget", "set", "--scope", "team", "--tokens", tokens])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    budget("1000");
    a.thread(json!({"action": "start", "prompt": "go", "taskName": "first"}));
    // A scripted turn spends 21 tokens.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while count(
        &base.db,
        "SELECT count(*) FROM thread_usage WHERE input_tokens > 0",
    ) == 0
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the first turn spent nothing"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    budget("10");
    let starts: Vec<Value> = (0..3)
        .map(|_| json!({"action": "start", "prompt": "go"}))
        .collect();
    let answers = race(&mut a, &mut b, &starts);
    assert_eq!(
        results_else(&answers, "limit", "Team budget reached"),
        0,
        "{answers:?}"
    );
    assert_eq!(count(&base.db, "SELECT count(*) FROM threads"), 1);
    budget("1000000");
    let answers = race(&mut a, &mut b, &starts);
    assert_eq!(results_else(&answers, "limit", "-"), 6, "{answers:?}");
    assert_eq!(count(&base.db, "SELECT count(*) FROM threads"), 7);
    close(a, b);
}
