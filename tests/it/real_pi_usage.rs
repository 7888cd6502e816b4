//! Token and cost accounting with real Pi 1.6 children against the fake LLM, whose every
//! answer reports a known usage and whose model has prices, so Pi reports a cost.
//!
//! - Three levels: the test is the root session's `serve`; /root/lead is a real Pi whose
//!   extension starts /root/lead/docs through lead's own `serve` (its own manager). The rows
//!   match the fake's numbers exactly (as Pi maps them), and the messages of each session
//!   file; the subtree and the tree add up across the two managers; through a stop and a
//!   resume the counts go on; a fork starts at zero; contract B's view carries them.
//! - Budget: once the tree's spend reaches THREADBASE_BUDGET_TOKENS, the running child is
//!   stopped at the cap (issue 49) with an exit message naming it, and the root's start,
//!   resume and fork are refused with `limit` (spend, cap and `Repair:` in the message).
//! - Wrap-up (issue 49): past 80% of a thread's own cap the idle child gets the wrap-up as a
//!   user message, and its answer is recorded.
//!
//! Skips without Pi unless CI=true.

use crate::support::fake_llm;
use crate::support::serve_client;

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fake_llm::{content_text, hermetic_pi_env, pi_or_skip, FakeLlm, PiEnv, Step, Usage};
use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};
use serve_client::{serve_with_pi_children, Serve};

/// Prices of the fake model, USD per million tokens.
const RATES: (f64, f64, f64, f64) = (3.0, 15.0, 0.3, 3.75);

/// The tests start several Node processes each; one at a time on a small machine.
static SERIAL: Mutex<()> = Mutex::new(());

/// What Pi 1.6 records for a fake answer's usage: (input, output, cacheRead, cacheWrite, cost).
fn as_pi(u: Usage) -> (i64, i64, i64, i64, f64) {
    let input = u.prompt_tokens - u.cached_tokens - u.cache_write_tokens;
    let (ri, ro, rr, rw) = RATES;
    let cost = ri / 1e6 * input as f64
        + ro / 1e6 * u.completion_tokens as f64
        + rr / 1e6 * u.cached_tokens as f64
        + rw * u.cache_write_tokens as f64 / 1e6;
    (
        input as i64,
        u.completion_tokens as i64,
        u.cached_tokens as i64,
        u.cache_write_tokens as i64,
        cost,
    )
}

/// A thread's `thread_usage` row: (input, output, cache read, cache write, cost, turns, tools).
type Row = (i64, i64, i64, i64, f64, i64, i64);

fn expected(messages: &[(Usage, i64)]) -> Row {
    let mut r: Row = (0, 0, 0, 0, 0.0, 0, 0);
    for &(u, tools) in messages {
        let (i, o, cr, cw, c) = as_pi(u);
        r = (
            r.0 + i,
            r.1 + o,
            r.2 + cr,
            r.3 + cw,
            r.4 + c,
            r.5 + 1,
            r.6 + tools,
        );
    }
    r
}

fn db(path: &Path) -> Connection {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap()
}

fn usage_row(db: &Connection, id: &str) -> Row {
    db.query_row(
        "SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, turns, tool_calls FROM thread_usage WHERE thread_id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)),
    )
    .unwrap()
}

/// Tokens exactly; the cost to the last few bits (a sum of floats in another grouping).
fn assert_row(got: Row, want: Row, what: &str) {
    assert_eq!(
        (got.0, got.1, got.2, got.3, got.5, got.6),
        (want.0, want.1, want.2, want.3, want.5, want.6),
        "{what}: {got:?} vs {want:?}"
    );
    assert!(
        (got.4 - want.4).abs() <= 1e-12 * want.4.max(1.0),
        "{what}: cost {} vs {}",
        got.4,
        want.4
    );
}

/// The assistant messages of a Pi session file: their usage as Pi wrote it.
fn session_usage(file: &str) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .map(|e| e["message"]["usage"].clone())
        .collect()
}

/// The file's assistant messages summed like a `thread_usage` row.
fn file_row(file: &str, since: usize) -> Row {
    let mut r: Row = (0, 0, 0, 0, 0.0, 0, 0);
    let text = std::fs::read_to_string(file).unwrap();
    for e in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .skip(since)
    {
        let u = &e["message"]["usage"];
        let n = |k: &str| u[k].as_i64().unwrap();
        let tools = e["message"]["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "toolCall")
            .count() as i64;
        r = (
            r.0 + n("input"),
            r.1 + n("output"),
            r.2 + n("cacheRead"),
            r.3 + n("cacheWrite"),
            r.4 + u["cost"]["total"].as_f64().unwrap(),
            r.5 + 1,
            r.6 + tools,
        );
    }
    r
}

fn stderr(s: &Serve) -> String {
    String::from_utf8_lossy(&s.stderr.lock().unwrap()).into_owned()
}

/// Waits on `id` until its result summary contains `needle` (a wait may end on a stale idle
/// reading before the answer arrives).
fn wait_for_result(root: &mut Serve, id: &str, needle: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(150);
    loop {
        let r = root.thread(json!({"action": "wait", "id": id, "timeoutMs": 60000}));
        let snap = r["details"]["snapshot"].clone();
        if snap["resultSummary"]
            .as_str()
            .is_some_and(|s| s.contains(needle))
        {
            return snap;
        }
        assert!(
            Instant::now() < deadline,
            "{id} never answered {needle:?}: {r}\n{}",
            stderr(root)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn root_serve(env: &PiEnv, pi: &[String], db: &Path, more: &[(&str, &str)]) -> Serve {
    let extension = concat!(env!("CARGO_MANIFEST_DIR"), "/pi-extension/index.ts");
    let argv = env.child_command(pi, &["-e", extension]);
    let mut vars = env.env.clone();
    vars.extend(more.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    serve_with_pi_children(db, &vars, &env.cwd, &argv, "thread", "ses_root")
}

#[test]
fn real_pi_usage_across_three_levels_a_resume_and_a_fork() {
    let Some(pi) = pi_or_skip("real_pi_usage_across_three_levels_a_resume_and_a_fork") else {
        return;
    };
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let fake = FakeLlm::start();
    let u1 = Usage::new(1200, 31, 200, 50);
    let u2 = Usage::new(900, 17, 0, 0);
    let u3 = Usage::new(1500, 23, 1024, 0);
    let u4 = Usage::new(1700, 40, 1400, 0);
    let u5 = Usage::new(2100, 12, 1600, 64);
    let u6 = Usage::new(2200, 9, 0, 0);
    let u7 = Usage::new(700, 70, 100, 7);
    // /root/lead: start /root/lead/docs through its own serve, wait for it, answer.
    fake.route(
        |r| r.last_is_user("LEAD-TASK"),
        Step::tool_call(
            "thread",
            json!({"action": "start", "taskName": "docs", "name": "Docs", "prompt": "DOCS-TASK: check the docs"}),
        )
        .with_usage(u1),
    );
    fake.route(
        |r| r.last_is_user("DOCS-TASK"),
        Step::text("DOCS-DONE: 3 stale examples").with_usage(u2),
    );
    fake.route(
        |r| {
            r.last_tool_result().is_some_and(|t| {
                t.contains("Started Pi thread") && t.contains("\nPath: /root/lead/docs")
            })
        },
        Step::tool_call(
            "thread",
            json!({"action": "wait", "id": "docs", "timeoutMs": 60000}),
        )
        .with_usage(u3),
    );
    fake.route(
        |r| {
            r.last_tool_result()
                .is_some_and(|t| t.contains("DOCS-DONE"))
        },
        Step::text("LEAD-DONE").with_usage(u4),
    );
    fake.route(
        |r| r.last_is_user("MORE-WORK"),
        Step::text("MORE-DONE").with_usage(u5),
    );
    fake.route(
        |r| r.last_is_user("FORK-WORK"),
        Step::text("FORK-DONE").with_usage(u6),
    );
    fake.route(
        |r| r.last_is_user("B-TASK"),
        Step::text("B-DONE").with_usage(u7),
    );

    let env = hermetic_pi_env(&fake);
    env.set_model_cost(RATES.0, RATES.1, RATES.2, RATES.3);
    let path = env.root.path().join("db.sqlite");
    let mut root = root_serve(&env, &pi, &path, &[]);

    let r = root.thread(json!({"action": "start", "taskName": "lead", "prompt": "LEAD-TASK: delegate the docs check"}));
    let lead = r["details"]["snapshot"]["id"].as_str().unwrap().to_string();
    wait_for_result(&mut root, "lead", "LEAD-DONE");

    let conn = db(&path);
    let (docs, docs_manager, docs_root, docs_parent, docs_level): (String, String, String, String, i64) = conn
        .query_row(
            "SELECT id, manager_session, root_session, forest_parent_id, level FROM thread_forest WHERE path = '/root/lead/docs'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap();
    let (lead_session, lead_file): (String, String) = conn
        .query_row(
            "SELECT session_id, session_file FROM threads WHERE id = ?1",
            [&lead],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    // docs lives in lead's own manager, hangs under lead, in the root's tree.
    assert_eq!(
        (
            docs_manager.as_str(),
            docs_root.as_str(),
            docs_parent.as_str(),
            docs_level
        ),
        (lead_session.as_str(), "ses_root", lead.as_str(), 2)
    );

    // The rows are the fake's numbers as Pi maps them, exactly.
    let lead_want = expected(&[(u1, 1), (u3, 1), (u4, 0)]);
    let docs_want = expected(&[(u2, 0)]);
    assert_row(usage_row(&conn, &lead), lead_want, "lead");
    assert_row(usage_row(&conn, &docs), docs_want, "docs");
    // … and what Pi 1.6 wrote in the session files: these fields, these values.
    let written = session_usage(&lead_file);
    assert_eq!(written.len(), 3, "{written:?}");
    // (Pi's cost.total can differ from the sum of its parts in the last bit.)
    let (i, o, cr, cw, c) = as_pi(u1);
    let mut first = written[0].clone();
    let total = first["cost"]["total"].take().as_f64().unwrap();
    assert!((total - c).abs() <= 1e-15, "cost.total {total} vs {c}");
    assert_eq!(
        first,
        json!({"input": i, "output": o, "cacheRead": cr, "cacheWrite": cw, "reasoning": 0,
               "totalTokens": i + o + cr + cw,
               "cost": {"input": RATES.0 / 1e6 * i as f64, "output": RATES.1 / 1e6 * o as f64,
                        "cacheRead": RATES.2 / 1e6 * cr as f64, "cacheWrite": RATES.3 * cw as f64 / 1e6,
                        "total": null, "totalFromProvider": false}}),
        "Pi 1.6's message.usage"
    );
    assert_row(
        usage_row(&conn, &lead),
        file_row(&lead_file, 0),
        "lead vs its session file",
    );
    // lead's own `thread` results told its session what docs spent, once (Pi keeps a tool
    // result's usage with it and counts it in the session's stats); lead's row leaves it out
    // (docs' row counts it), so the subtree below does not count it twice.
    let told: Vec<Value> = std::fs::read_to_string(&lead_file)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            e["type"] == "message"
                && e["message"]["role"] == "toolResult"
                && e["message"]["toolName"] == "thread"
                && !e["message"]["usage"].is_null()
        })
        .map(|e| e["message"]["usage"].clone())
        .collect();
    let (di, d_o, dcr, dcw, dc) = as_pi(u2);
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(
        (
            &told[0]["input"],
            &told[0]["output"],
            &told[0]["cacheRead"],
            &told[0]["cacheWrite"]
        ),
        (&json!(di), &json!(d_o), &json!(dcr), &json!(dcw)),
        "{told:?}"
    );
    assert!((told[0]["cost"]["total"].as_f64().unwrap() - dc).abs() < 1e-12);
    let docs_file: String = conn
        .query_row(
            "SELECT session_file FROM threads WHERE id = ?1",
            [&docs],
            |r| r.get(0),
        )
        .unwrap();
    assert_row(
        usage_row(&conn, &docs),
        file_row(&docs_file, 0),
        "docs vs its session file",
    );

    // The subtree and the tree add up across both managers.
    let both = expected(&[(u1, 1), (u3, 1), (u4, 0), (u2, 0)]);
    let (threads, input, output, cost): (i64, i64, i64, f64) = conn
        .query_row("SELECT threads, input_tokens, output_tokens, cost_usd FROM subtree_usage WHERE thread_id = ?1", [&lead], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .unwrap();
    assert_eq!((threads, input, output), (2, both.0, both.1));
    assert!((cost - both.4).abs() < 1e-12);
    let tree: (i64, i64, i64, i64) = conn
        .query_row("SELECT threads, input_tokens, cache_read_tokens, cache_write_tokens FROM tree_usage WHERE root_session = 'ses_root'", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .unwrap();
    assert_eq!(tree, (2, both.0, both.2, both.3));
    drop(conn);

    // Through a stop and a resume the counts go on from where they were.
    let r = root.thread(json!({"action": "stop", "id": "lead"}));
    assert_eq!(r["details"]["snapshot"]["status"], "closed", "{r}");
    let r = root.thread(json!({"action": "resume", "id": "lead"}));
    assert_eq!(r["details"]["snapshot"]["status"], "live", "{r}");
    root.thread(json!({"action": "send", "id": "lead", "message": "MORE-WORK please"}));
    wait_for_result(&mut root, "lead", "MORE-DONE");
    let conn = db(&path);
    let lead_want = expected(&[(u1, 1), (u3, 1), (u4, 0), (u5, 0)]);
    assert_row(usage_row(&conn, &lead), lead_want, "lead after the resume");
    assert_row(
        usage_row(&conn, &lead),
        file_row(&lead_file, 0),
        "lead vs its session file after the resume",
    );
    assert_row(usage_row(&conn, &docs), docs_want, "docs unchanged");
    drop(conn);

    // A fork copies four paid messages and starts at zero; its own message counts.
    let r = root.thread(json!({"action": "fork", "id": "lead", "taskName": "lead_fork"}));
    let fork = r["details"]["snapshot"]["id"].as_str().unwrap().to_string();
    let conn = db(&path);
    assert_row(
        usage_row(&conn, &fork),
        (0, 0, 0, 0, 0.0, 0, 0),
        "the fork at its start",
    );
    let fork_file: String = conn
        .query_row(
            "SELECT session_file FROM threads WHERE id = ?1",
            [&fork],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        session_usage(&fork_file).len(),
        4,
        "the fork's copied history"
    );
    drop(conn);
    root.thread(json!({"action": "send", "id": "lead_fork", "message": "FORK-WORK"}));
    wait_for_result(&mut root, "lead_fork", "FORK-DONE");
    let conn = db(&path);
    assert_row(
        usage_row(&conn, &fork),
        expected(&[(u6, 0)]),
        "the fork after its message",
    );
    assert_row(
        usage_row(&conn, &fork),
        file_row(&fork_file, 4),
        "the fork vs its own messages",
    );
    drop(conn);

    // Contract B's view carries the thread's own figures.
    let id = root.send(
        "agent_spawn",
        json!({"path": "b", "type": "worker", "task": "B-TASK: one answer", "wait": true, "timeoutMs": 120000}),
    );
    let r = root.response(id, Duration::from_secs(180));
    let view = &r["result"]["details"];
    assert_eq!(view["state"], "completed", "{r}\n{}", stderr(&root));
    let (i, o, _, _, c) = as_pi(u7);
    assert_eq!(
        (&view["inputTokens"], &view["outputTokens"]),
        (&json!(i), &json!(o)),
        "{view}"
    );
    assert!(
        (view["costUsd"].as_f64().unwrap() - c).abs() < 1e-15,
        "{view}"
    );

    assert!(root.close(Duration::from_secs(60)).success());
    let left = env.leftovers_after(Duration::from_secs(15));
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn real_pi_budget_refuses_new_work_and_stops_running_children_at_the_cap() {
    let Some(pi) =
        pi_or_skip("real_pi_budget_refuses_new_work_and_stops_running_children_at_the_cap")
    else {
        return;
    };
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let fake = FakeLlm::start();
    let big = Usage::new(5000, 100, 0, 0);
    // /root/work: a slow shell command whose message takes the tree past the cap (issue 49:
    // the running child is then stopped at the tree's cap, mid-command).
    fake.route(
        |r| r.last_is_user("BUDGET-TASK"),
        Step::bash("sleep 5; echo slept").with_usage(big),
    );
    fake.route(
        |r| r.last_tool_result().is_some(),
        Step::text("WORK-DONE").with_usage(Usage::new(300, 20, 0, 0)),
    );
    let env = hermetic_pi_env(&fake);
    env.set_model_cost(RATES.0, RATES.1, RATES.2, RATES.3);
    let path = env.root.path().join("db.sqlite");
    let mut root = root_serve(&env, &pi, &path, &[("THREADBASE_BUDGET_TOKENS", "1000")]);

    let r = root.thread(json!({"action": "start", "taskName": "work", "prompt": "BUDGET-TASK"}));
    let work = r["details"]["snapshot"]["id"].as_str().unwrap().to_string();

    // Once the first message is recorded the tree is past the cap: the child is stopped with
    // an exit message naming the cap.
    let deadline = Instant::now() + Duration::from_secs(120);
    let (kind, message) = loop {
        let row: Option<(String, Option<String>, Option<String>)> = db(&path)
            .query_row(
                "SELECT status, exit_kind, exit_message FROM threads WHERE id = ?1",
                [&work],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .ok();
        if let Some(("closed", kind, message)) = row
            .as_ref()
            .map(|(s, k, m)| (s.as_str(), k.clone(), m.clone()))
        {
            break (kind, message.unwrap_or_default());
        }
        assert!(
            Instant::now() < deadline,
            "the child was never stopped at the cap: {row:?}\n{}",
            stderr(&root)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(kind.as_deref(), Some("stopped"), "{message}");
    assert!(
        message.starts_with("Stopped at its cap: it used 5,100 tokens of 1,000 tokens")
            && message.contains("the tree cap THREADBASE_BUDGET_TOKENS=1,000"),
        "{message}"
    );
    let e = root.thread_error(json!({"action": "start", "taskName": "other", "prompt": "x"}));
    assert_eq!(e["code"], "limit", "{e}");
    let msg = e["message"].as_str().unwrap();
    for needle in [
        "Budget reached",
        "5,100 tokens spent of THREADBASE_BUDGET_TOKENS=1,000",
        "session ses_root",
        "running threads of it are asked to wrap up and stopped at the cap",
        "Repair:",
    ] {
        assert!(msg.contains(needle), "{needle:?} not in {msg}");
    }
    // What it spent is recorded, and the aborted message Pi records (a turn, no tokens); it
    // never got to answer.
    let conn = db(&path);
    assert_row(
        usage_row(&conn, &work),
        expected(&[(big, 1), (Usage::new(0, 0, 0, 0), 0)]),
        "work",
    );
    drop(conn);
    assert!(
        fake.completion_requests()
            .iter()
            .all(|r| r.last_tool_result().is_none()),
        "the shell command was cut short"
    );

    // Stopped, it cannot be resumed or forked while the tree is over its cap.
    for params in [
        json!({"action": "resume", "id": "work"}),
        json!({"action": "fork", "id": "work"}),
    ] {
        let e = root.thread_error(params.clone());
        assert_eq!(e["code"], "limit", "{params}: {e}");
    }
    assert!(root.close(Duration::from_secs(60)).success());
    let left = env.leftovers_after(Duration::from_secs(15));
    assert!(left.is_empty(), "{left:?}");
}

/// Issue 49 with real Pi: past 80% of its own cap an idle child gets the wrap-up as a
/// follow-up, which reaches its model as a user message, and its answer is recorded.
#[test]
fn real_pi_wrap_up_reaches_the_child_as_a_user_message_and_its_answer_is_recorded() {
    let Some(pi) = pi_or_skip(
        "real_pi_wrap_up_reaches_the_child_as_a_user_message_and_its_answer_is_recorded",
    ) else {
        return;
    };
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let fake = FakeLlm::start();
    fake.route(
        |r| r.last_is_user("CAPPED-TASK"),
        Step::text("FIRST-DONE").with_usage(Usage::new(800, 50, 0, 0)),
    );
    fake.route(
        |r| r.last_is_user("[threadbase] Budget:"),
        Step::text("REPORT: step finished, nothing left").with_usage(Usage::new(100, 10, 0, 0)),
    );
    let env = hermetic_pi_env(&fake);
    env.set_model_cost(RATES.0, RATES.1, RATES.2, RATES.3);
    let path = env.root.path().join("db.sqlite");
    let mut root = root_serve(
        &env,
        &pi,
        &path,
        &[("THREADBASE_THREAD_BUDGET_TOKENS", "1000")],
    );
    let r = root.thread(json!({"action": "start", "taskName": "capped", "prompt": "CAPPED-TASK"}));
    let id = r["details"]["snapshot"]["id"].as_str().unwrap().to_string();
    let snap = wait_for_result(&mut root, &id, "REPORT: step finished");
    assert_eq!(snap["status"], "live", "{snap}");
    let wrap_up = fake
        .completion_requests()
        .iter()
        .filter(|r| r.last_is_user("[threadbase] Budget:"))
        .map(|r| r.last_user_text().unwrap_or_default())
        .collect::<Vec<_>>();
    assert_eq!(wrap_up.len(), 1, "{wrap_up:?}");
    assert!(
        wrap_up[0].contains("850 tokens of 1,000 tokens (85%)")
            && wrap_up[0].contains("THREADBASE_THREAD_BUDGET_TOKENS=1,000")
            && wrap_up[0].contains("Finish the step you are on"),
        "{}",
        wrap_up[0]
    );
    let conn = db(&path);
    let delivery: String = conn
        .query_row(
            "SELECT json_extract(data, '$.delivery') FROM thread_events WHERE thread_id = ?1 AND type = 'budget_warned'",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(delivery, "follow_up");
    let answer: String = conn
        .query_row(
            "SELECT last_assistant_text FROM thread_output WHERE thread_id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert!(answer.contains("REPORT: step finished"), "{answer}");
    drop(conn);
    assert!(root.close(Duration::from_secs(60)).success());
    let left = env.leftovers_after(Duration::from_secs(15));
    assert!(left.is_empty(), "{left:?}");
}

/// Spend where the user looks, with real Pi 1.6 as the parent (the extension loaded) and as
/// the child: the parent's `thread` tool results carry the child's usage (serve's
/// `--report-usage`), once in all, and Pi adds it to the session's totals, so
/// `get_session_stats` (the figures of the interactive footer) counts the child's tokens and
/// cost beside the parent's own; the parent's own turns reach `session_usage`, so
/// `threadbase usage` counts them as part of the tree and says so.
#[test]
fn real_pi_parent_session_stats_count_the_childs_spend_once() {
    let test = "real_pi_parent_session_stats_count_the_childs_spend_once";
    let Some((pi, _parents)) = crate::support::pi_child::parent_pi_or_skip(test) else {
        return;
    };
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    use crate::support::pi_child::{self, CHILD_ANSWER, CHILD_PROMPT};
    let own = [
        Usage::new(1000, 10, 0, 0),
        Usage::new(1100, 11, 0, 0),
        Usage::new(1200, 12, 0, 0),
        Usage::new(1300, 13, 0, 0),
    ];
    let child = Usage::new(5000, 500, 0, 0);
    let fake = FakeLlm::with_script([
        Step::tool_call(
            "thread",
            json!({"action": "start", "prompt": CHILD_PROMPT, "taskName": "magic"}),
        )
        .with_usage(own[0]),
        Step::tool_call(
            "thread",
            json!({"action": "wait", "id": "magic", "timeoutMs": 60000}),
        )
        .with_usage(own[1]),
        Step::tool_call("thread", json!({"action": "poll", "id": "magic"})).with_usage(own[2]),
        Step::text("Done.").with_usage(own[3]),
    ]);
    fake.route(
        |r| r.last_user_text().as_deref() == Some(CHILD_PROMPT),
        Step::text(CHILD_ANSWER).with_usage(child),
    );
    let env = hermetic_pi_env(&fake);
    env.set_model_cost(RATES.0, RATES.1, RATES.2, RATES.3);
    let path = env.root.path().join("db.sqlite");
    let mut parent = pi_child::spawn_parent(
        &pi,
        &env,
        &pi_child::extension_dir().join("index.ts"),
        &path,
        json!(pi).to_string(),
        &[],
    );
    let events = parent.run(
        "p1",
        "Use a background thread to find out the magic word.",
        Duration::from_secs(120),
    );
    let dump = parent.dump();

    // The tool results carry the child's spend, once in all.
    let ends = pi_child::tool_ends(&events, "thread");
    assert_eq!(ends.len(), 3, "{dump}");
    let (ci, co, ccr, ccw, cc) = as_pi(child);
    let mut told = (0, 0, 0, 0, 0.0);
    for end in &ends {
        assert_eq!(end["isError"], false, "{end}");
        let u = &end["result"]["usage"];
        if u.is_null() {
            continue;
        }
        let n = |k: &str| u[k].as_i64().unwrap();
        told = (
            told.0 + n("input"),
            told.1 + n("output"),
            told.2 + n("cacheRead"),
            told.3 + n("cacheWrite"),
            told.4 + u["cost"]["total"].as_f64().unwrap(),
        );
    }
    assert_eq!(
        (told.0, told.1, told.2, told.3),
        (ci, co, ccr, ccw),
        "{dump}"
    );
    assert!((told.4 - cc).abs() < 1e-12, "{told:?} vs {cc}");
    // The poll's text shows the child's own spend.
    let poll_text = content_text(&ends[2]["result"]["content"]);
    assert!(
        poll_text.contains(&format!("\nSpent: 5.5k tokens, ${cc:.4}\n")),
        "{poll_text}"
    );

    // get_session_stats: the parent's own messages and the child's spend.
    let mine = expected(&own.iter().map(|u| (*u, 1)).collect::<Vec<_>>());
    parent.send(&json!({"id": "stats", "type": "get_session_stats"}));
    let stats = parent.response("stats", Duration::from_secs(30));
    let data = &stats["data"];
    assert_eq!(
        (&data["tokens"]["input"], &data["tokens"]["output"]),
        (&json!(mine.0 + ci), &json!(mine.1 + co)),
        "{stats}"
    );
    let cost = data["cost"].as_f64().unwrap();
    assert!(
        (cost - (mine.4 + cc)).abs() < 1e-12,
        "cost {cost} vs parent {} + child {cc}: {stats}",
        mine.4
    );
    eprintln!(
        "{test}: get_session_stats cost {cost:.6} = parent's own {:.6} + child's {cc:.6}",
        mine.4
    );

    // The parent's own turns in session_usage, and `threadbase usage` counting them.
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(pi_child::parent_session(&env))
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let session = header["id"].as_str().unwrap().to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    let recorded = loop {
        let row: Option<Row> = db(&path)
            .query_row(
                "SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, turns, tool_calls FROM session_usage WHERE session_id = ?1",
                [&session],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?)),
            )
            .ok();
        if row.is_some_and(|r| r.5 == 4) || Instant::now() > deadline {
            break row;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let recorded = recorded.unwrap_or_else(|| panic!("no session_usage row\n{dump}"));
    assert_row(
        recorded,
        (mine.0, mine.1, mine.2, mine.3, mine.4, 4, 3),
        "the parent's own turns",
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&path)
        .args(["usage", "--json"])
        .env_remove("THREADBASE_BUDGET_TOKENS")
        .env_remove("THREADBASE_BUDGET_USD")
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tree = v["trees"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["rootSession"] == session.as_str())
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(tree["inputTokens"], json!(mine.0 + ci), "{tree}");
    assert_eq!(tree["session"]["inputTokens"], json!(mine.0), "{tree}");
    let text = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&path)
        .arg("usage")
        .env_remove("THREADBASE_BUDGET_TOKENS")
        .env_remove("THREADBASE_BUDGET_USD")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!(
            "  session {session} itself (its own turns, counted in the total): "
        )),
        "{text}"
    );
    eprintln!("{text}");

    parent.finish(Duration::from_secs(10));
    let left = env.leftovers_after(Duration::from_secs(20));
    assert!(left.is_empty(), "{left:?}");
}
