//! Issue 49: a cap per thread with a wrap-up before the stop, and a tree that cannot fan out
//! without end. A child that keeps spending is asked once, past THREADBASE_BUDGET_WARN of its
//! cap, to finish its step and report (a steer while it is busy, a follow-up while idle), and
//! is stopped at the cap with an exit message naming it; its events and its parent's two
//! notices say so. A thread under its cap is never touched; a turn cap counts turns; a resume
//! over the cap is refused; THREADBASE_MAX_TREE_THREADS holds across the serves of a tree.
//! Real serves, scripted children, on both backends.

use crate::support::serve_client::{self, Scripted, Serve};
use crate::support::sql;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const WRAP_UP: &str = "[threadbase] Budget: this thread has used ";

fn cli(db: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_threadbase"));
    c.arg("--db").arg(db).args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn start(s: &mut Serve, task: &str, prompt: &str) -> String {
    let r = s.thread(json!({"action": "start", "prompt": prompt, "taskName": task}));
    assert_eq!(r["details"]["kind"], "started", "{r}");
    r["details"]["snapshot"]["id"].as_str().unwrap().to_string()
}

fn wait_idle(s: &mut Serve, id: &str) {
    let r = s.thread(json!({"action": "wait", "id": id, "timeoutMs": 20000}));
    assert_eq!(r["details"]["timedOut"], false, "{r}");
}

/// (status, exit_kind, exit_message) of thread `id`.
fn state(db: &std::path::Path, id: &str) -> (String, Option<String>, Option<String>) {
    let rows = sql::values(
        db,
        &format!(
            "SELECT status, exit_kind, exit_message FROM threads WHERE id = {}",
            sql::lit(id)
        ),
    );
    let r = &rows[0];
    let text = |i: usize| sql::json(r[i].clone()).as_str().map(str::to_string);
    (text(0).unwrap(), text(1), text(2))
}

fn until_closed(db: &std::path::Path, id: &str) -> (String, Option<String>, Option<String>) {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let s = state(db, id);
        if s.0 == "closed" {
            return s;
        }
        assert!(Instant::now() < deadline, "{id} still {s:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The data of thread `id`'s events of type `kind`, oldest first.
fn events(db: &std::path::Path, id: &str, kind: &str) -> Vec<Value> {
    sql::values(
        db,
        &format!(
            "SELECT data FROM thread_events WHERE thread_id = {} AND type = {} ORDER BY seq",
            sql::lit(id),
            sql::lit(kind)
        ),
    )
    .into_iter()
    .map(|r| {
        let v = sql::json(r[0].clone());
        match v.as_str() {
            Some(text) => serde_json::from_str(text).unwrap(),
            None => v,
        }
    })
    .collect()
}

fn session_file(db: &std::path::Path, id: &str) -> std::path::PathBuf {
    let rows = sql::values(
        db,
        &format!(
            "SELECT session_file FROM threads WHERE id = {}",
            sql::lit(id)
        ),
    );
    std::path::PathBuf::from(sql::json(rows[0][0].clone()).as_str().unwrap())
}

/// The notices so far whose text contains `needle`, waiting up to 10 s for `want` of them.
fn notices_with(s: &Serve, needle: &str, want: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<String> = s
            .notices()
            .iter()
            .filter_map(|n| n["params"]["text"].as_str().map(str::to_string))
            .filter(|t| t.contains(needle))
            .collect();
        if found.len() >= want || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A turn that keeps spending: twelve messages of about 100 output tokens each, 300 ms apart
/// (each a turn boundary, where a steer is delivered).
fn spending_turn() -> Value {
    let text = "x".repeat(400);
    json!({"steps": (0..12).map(|_| json!({"text": text, "delay_ms": 300})).collect::<Vec<_>>()})
}

#[test]
fn a_child_that_keeps_spending_is_told_once_at_80_percent_and_stopped_at_its_cap() {
    let base = Scripted::new("caps_spend");
    // The first prompt of each child is cheap; a later one spends without end, and so does
    // the turn the wrap-up starts (this child ignores it).
    base.script(
        "script",
        &json!({"turns": ["ok", spending_turn(), spending_turn()], "default_reply": "ok"})
            .to_string(),
    );
    let db = base.db.clone();
    let mut s = base.serve(
        "script",
        vec!["--session-id".into(), "ses_caps".into()],
        &[("THREADBASE_THREAD_BUDGET_TOKENS", "1000")],
    );
    let spender = start(&mut s, "spender", "warm up");
    wait_idle(&mut s, &spender);
    let calm = start(&mut s, "calm", "hello");
    wait_idle(&mut s, &calm);
    let r = s.thread(json!({"action": "send", "id": spender, "message": "go"}));
    assert!(r.get("details").is_some(), "{r}");

    let (status, kind, message) = until_closed(&db, &spender);
    assert_eq!(
        (status.as_str(), kind.as_deref()),
        ("closed", Some("stopped"))
    );
    let message = message.unwrap_or_default();
    assert!(
        message.starts_with("Stopped at its cap: it used ")
            && message.contains("(the thread cap THREADBASE_THREAD_BUDGET_TOKENS=1,000)")
            && message.contains("Repair: raise THREADBASE_THREAD_BUDGET_TOKENS"),
        "{message}"
    );

    // Exactly one wrap-up, delivered as a steer while it was busy, then the stop.
    let warned = events(&db, &spender, "budget_warned");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(
        (
            &warned[0]["scope"],
            &warned[0]["cap"],
            &warned[0]["delivery"]
        ),
        (&json!("thread"), &json!("tokens"), &json!("steer")),
        "{warned:?}"
    );
    let used = warned[0]["used"].as_f64().unwrap();
    assert!((800.0..1000.0).contains(&used), "{warned:?}");
    let stopped = events(&db, &spender, "budget_stopped");
    assert_eq!(stopped.len(), 1, "{stopped:?}");
    assert!(
        stopped[0]["used"].as_f64().unwrap() >= 1000.0,
        "{stopped:?}"
    );
    let users = serve_client::session_user_texts(&session_file(&db, &spender));
    let wrap_ups: Vec<&String> = users.iter().filter(|t| t.starts_with(WRAP_UP)).collect();
    assert_eq!(wrap_ups.len(), 1, "{users:?}");
    assert!(
        wrap_ups[0].contains("of the thread cap THREADBASE_THREAD_BUDGET_TOKENS=1,000")
            && wrap_ups[0].contains("Finish the step you are on, then stop and report"),
        "{}",
        wrap_ups[0]
    );

    // The parent's two notices: the wrap-up and the stop.
    let told = notices_with(&s, "was asked to finish its step and report", 1);
    assert_eq!(told.len(), 1, "{:?}", s.notices());
    assert!(
        told[0].starts_with("Thread \"warm up\" (/root/spender) used ")
            && told[0].contains("THREADBASE_THREAD_BUDGET_TOKENS=1,000"),
        "{}",
        told[0]
    );
    let closed = notices_with(&s, "Stopped at its cap", 1);
    assert_eq!(closed.len(), 1, "{:?}", s.notices());
    assert!(closed[0].contains("/root/spender"), "{}", closed[0]);

    // The thread under its cap was never touched.
    assert_eq!(state(&db, &calm).0, "live");
    assert!(events(&db, &calm, "budget_warned").is_empty());
    assert!(events(&db, &calm, "budget_stopped").is_empty());
    assert!(serve_client::session_user_texts(&session_file(&db, &calm))
        .iter()
        .all(|t| !t.starts_with(WRAP_UP)));
    assert!(s.notices().iter().all(|n| !n["params"]["text"]
        .as_str()
        .unwrap_or("")
        .contains("(/root/calm)")
        || !n["params"]["text"].as_str().unwrap_or("").contains("cap")));

    // A resume over the cap is refused, with how to raise it.
    let refused = s.thread_error(json!({"action": "resume", "id": spender}));
    assert_eq!(refused["code"], "limit", "{refused}");
    let text = refused["message"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("Thread {spender} is at its cap: it used "))
            && text.contains("Repair: raise THREADBASE_THREAD_BUDGET_TOKENS"),
        "{text}"
    );
    // `usage` says which cap applies and how much of it each thread used.
    let (code, out, err) = cli(
        &db,
        &["usage"],
        &[("THREADBASE_THREAD_BUDGET_TOKENS", "1000")],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("thread cap THREADBASE_THREAD_BUDGET_TOKENS=1,000"),
        "{out}"
    );
    s.close(Duration::from_secs(20));
}

#[test]
fn a_turn_cap_counts_turns_and_a_resume_over_it_is_refused() {
    let base = Scripted::new("caps_turns");
    base.script("script", &json!({"default_reply": "ok"}).to_string());
    let db = base.db.clone();
    let mut s = base.serve(
        "script",
        vec!["--session-id".into(), "ses_turns".into()],
        &[],
    );
    s.thread(json!({"action": "list"}));
    // The database's cap per thread: five turns.
    let (code, out, err) = cli(
        &db,
        &["budget", "set", "--scope", "thread", "--turns", "5"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("thread budget set: 5 turns (set "), "{out}");
    let id = start(&mut s, "counter", "one");
    wait_idle(&mut s, &id);
    for n in ["two", "three", "four"] {
        s.thread(json!({"action": "send", "id": id, "message": n}));
        wait_idle(&mut s, &id);
    }
    // At four turns of five (80%) it is idle: the wrap-up is a follow-up, whose answer is
    // the fifth turn, and the cap stops it.
    let (_, kind, message) = until_closed(&db, &id);
    assert_eq!(kind.as_deref(), Some("stopped"));
    let message = message.unwrap_or_default();
    assert!(
        message.starts_with("Stopped at its cap: it used 5 turns of 5 turns (100%) (the database's thread budget of 5 turns). Repair: raise it with `threadbase budget set --scope thread --turns N`"),
        "{message}"
    );
    let warned = events(&db, &id, "budget_warned");
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert_eq!(
        (
            &warned[0]["cap"],
            &warned[0]["used"],
            &warned[0]["delivery"]
        ),
        (&json!("turns"), &json!(4.0), &json!("follow_up")),
        "{warned:?}"
    );
    assert_eq!(events(&db, &id, "budget_stopped").len(), 1);
    let users = serve_client::session_user_texts(&session_file(&db, &id));
    assert_eq!(
        users.iter().filter(|t| t.starts_with(WRAP_UP)).count(),
        1,
        "{users:?}"
    );
    let turns = sql::count(
        &db,
        &format!(
            "SELECT turns FROM thread_usage WHERE thread_id = {}",
            sql::lit(&id)
        ),
    );
    assert_eq!(turns, 5);
    let refused = s.thread_error(json!({"action": "resume", "id": id}));
    assert_eq!(refused["code"], "limit", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("Repair: raise it with `threadbase budget set --scope thread --turns N`"),
        "{refused}"
    );
    // Raised, the resume goes through.
    cli(
        &db,
        &["budget", "set", "--scope", "thread", "--turns", "50"],
        &[],
    );
    let r = s.thread(json!({"action": "resume", "id": id}));
    assert!(r.get("details").is_some(), "{r}");
    s.close(Duration::from_secs(20));
}

#[test]
fn two_serves_of_one_tree_cannot_together_pass_the_tree_thread_limit() {
    let base = Scripted::new("caps_fanout");
    base.script("script", &json!({"default_reply": "ok"}).to_string());
    let db = base.db.clone();
    let limit = [("THREADBASE_MAX_TREE_THREADS", "3")];
    let mut root = base.serve(
        "script",
        vec!["--session-id".into(), "ses_root".into()],
        &limit,
    );
    let lead = start(&mut root, "lead", "lead the work");
    wait_idle(&mut root, &lead);
    let rows = sql::values(
        &db,
        &format!(
            "SELECT session_id FROM threads WHERE id = {}",
            sql::lit(&lead)
        ),
    );
    let lead_session = sql::json(rows[0][0].clone()).as_str().unwrap().to_string();
    // The lead's own serve, as its Pi's extension starts it.
    let mut own = base.serve(
        "script",
        vec!["--session-id".into(), lead_session],
        &[
            ("THREADBASE_MAX_TREE_THREADS", "3"),
            ("PI_THREADS_PATH", "/root/lead"),
            ("PI_THREADS_SELF_ID", &lead),
            ("PI_THREADS_DEPTH", "1"),
            ("PI_THREADS_ROOT_SESSION_ID", "ses_root"),
        ],
    );
    start(&mut own, "sub", "help");
    // One start is left: both serves ask at once, and one gets it.
    let a = root.send(
        "thread",
        json!({"action": "start", "prompt": "more", "taskName": "more"}),
    );
    let b = own.send(
        "thread",
        json!({"action": "start", "prompt": "more", "taskName": "more"}),
    );
    let ra = root.response(a, Duration::from_secs(20));
    let rb = own.response(b, Duration::from_secs(20));
    let started = [&ra, &rb]
        .iter()
        .filter(|r| r.get("result").is_some())
        .count();
    assert_eq!(started, 1, "{ra}\n{rb}");
    let refused = if ra.get("error").is_some() { &ra } else { &rb };
    assert_eq!(refused["error"]["code"], "limit", "{refused}");
    let text = refused["error"]["message"].as_str().unwrap();
    assert!(
        text.starts_with("Thread limit reached for the tree of session ses_root: it has started 3 threads of THREADBASE_MAX_TREE_THREADS=3")
            && text.contains("Repair: "),
        "{text}"
    );
    // And later ones, from either serve.
    for s in [&mut root, &mut own] {
        let e = s.thread_error(json!({"action": "start", "prompt": "again"}));
        assert_eq!(e["code"], "limit", "{e}");
    }
    assert_eq!(
        sql::count(
            &db,
            "SELECT threads FROM tree_usage WHERE root_session = 'ses_root'"
        ),
        3
    );
    own.close(Duration::from_secs(20));
    root.close(Duration::from_secs(20));
}

#[test]
fn bad_caps_are_clear_errors_and_change_nothing() {
    let base = Scripted::new("caps_bad");
    base.script("script", &json!({"default_reply": "ok"}).to_string());
    let db = base.db.clone();
    let mut s = base.serve("script", vec!["--session-id".into(), "ses_bad".into()], &[]);
    s.thread(json!({"action": "list"}));
    s.close(Duration::from_secs(20));
    for (args, want) in [
        (
            vec!["budget", "set", "--scope", "thread"],
            "budget set needs a cap: --tokens N, --usd DOLLARS, --turns N",
        ),
        (
            vec!["budget", "set", "--scope", "thread", "--tokens", "-5"],
            "--tokens must be",
        ),
        (
            vec!["budget", "set", "--scope", "thread", "--usd", "lots"],
            "--usd must be",
        ),
        (
            vec!["budget", "set", "--scope", "thread", "--turns", "0"],
            "--turns must be",
        ),
        (
            vec!["budget", "set", "--scope", "thread", "--turns", "ten"],
            "--turns must be",
        ),
        (
            vec!["budget", "set", "--scope", "tree", "--turns", "5"],
            "--turns caps a thread's turns",
        ),
    ] {
        let (code, _, err) = cli(&db, &args, &[]);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(want) && err.contains("Repair:") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
    let (_, out, _) = cli(&db, &["budget", "--json"], &[]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&v["thread"], &v["tree"]),
        (&Value::Null, &Value::Null),
        "{v}"
    );
    // A serve with a bad cap in its environment does not start.
    for (var, bad) in [
        ("THREADBASE_BUDGET_WARN", "1.5"),
        ("THREADBASE_BUDGET_WARN", "-0.2"),
        ("THREADBASE_BUDGET_WARN", "most"),
        ("THREADBASE_THREAD_BUDGET_TOKENS", "-5"),
        ("THREADBASE_THREAD_BUDGET_USD", "five"),
        ("THREADBASE_THREAD_MAX_TURNS", "0"),
        ("THREADBASE_MAX_TREE_THREADS", "many"),
    ] {
        let mut s = base.serve(
            "script",
            vec!["--session-id".into(), "ses_bad".into()],
            &[(var, bad)],
        );
        let status = s.close(Duration::from_secs(20));
        let err = String::from_utf8_lossy(&s.stderr.lock().unwrap()).into_owned();
        assert!(!status.success(), "{var}={bad}: {err}");
        assert!(
            err.contains(var) && err.contains("Repair:") && !err.contains("panicked"),
            "{var}={bad}: {err}"
        );
    }
    assert_eq!(
        sql::count(&db, "SELECT count(*) FROM threads"),
        0,
        "nothing was started"
    );
}
