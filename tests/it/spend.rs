//! Spend where the user looks (issue 28, item 2), through a real serve: what a session is told
//! of its children's spend (`--report-usage`, once per token across polls and serves), the
//! poll, wait and list texts with each thread's spend (details unchanged), and the root
//! session's own turns (`session_usage`) in `threadbase usage` and the budgets.

use std::time::Duration;

use serde_json::{json, Value};
use threadbase::store::usage::{self, Usage};
use threadbase::Store;

use crate::support::common::{add, thread, tid};
use crate::support::serve_client::{Scripted, Serve};
use threadbase::domain::ThreadId;

const SESSION: &str = "ses_spend";
const AT: &str = "2026-01-01T00:00:00.000Z";
const LONG: Duration = Duration::from_secs(60);

fn spent(input: i64, output: i64, cache_read: i64, cost: f64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: cache_read,
        cache_write_tokens: 0,
        cost_usd: cost,
        turns: 1,
        tool_calls: 0,
    }
}

fn serve(s: &Scripted, session: &str, more: &[&str], env: &[(&str, &str)]) -> Serve {
    let mut args = vec!["--session-id".to_string(), session.to_string()];
    args.extend(more.iter().map(|a| a.to_string()));
    s.serve("none", args, env)
}

/// The manager serve made for `session` (serve must have started).
fn manager_of(s: &Scripted, session: &str) -> threadbase::domain::ManagerId {
    let conn = crate::support::sql::Conn::open(&s.db).unwrap();
    threadbase::domain::ManagerId(
        conn.query_row(
            "SELECT id FROM managers WHERE session_id = ?1 AND contract = 'thread'",
            [session],
            |r| r.get(0),
        )
        .unwrap(),
    )
}

/// A `thread` call: its result and the `usage` notifications that came for it.
fn call(serve: &mut Serve, params: Value) -> (Value, Vec<Value>) {
    let id = serve.send("thread", params.clone());
    let r = serve.response(id, LONG);
    assert!(r.get("error").is_none(), "{params}: {r}");
    let told = serve
        .notifications()
        .into_iter()
        .filter(|n| n["method"] == "usage" && n["params"]["requestId"] == id)
        .map(|n| n["params"]["usage"].clone())
        .collect();
    (r["result"].clone(), told)
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap()
}

/// Pi's usage shape with these figures (`cost.total` compared to 1e-9).
fn assert_pi_usage(u: &Value, input: i64, output: i64, cache_read: i64, cost: f64) {
    assert_eq!(
        (
            &u["input"],
            &u["output"],
            &u["cacheRead"],
            &u["cacheWrite"],
            &u["totalTokens"]
        ),
        (
            &json!(input),
            &json!(output),
            &json!(cache_read),
            &json!(0),
            &json!(input + output + cache_read)
        ),
        "{u}"
    );
    let total = u["cost"]["total"].as_f64().unwrap();
    assert!((total - cost).abs() < 1e-9, "{u}");
}

/// Each token the threads below a session spent is reported to that session once: the first
/// answer after the spend carries it, later ones nothing, a new spend only its difference, a
/// serve without `--report-usage` reports nothing (and so keeps it for the next that does),
/// and a new serve of the same session does not report it again.
#[test]
fn a_session_is_told_each_childs_spend_once_across_calls_and_serves() {
    let s = Scripted::new("spend-told");
    let mut first = serve(&s, SESSION, &["--report-usage"], &[]);
    let (_, told) = call(&mut first, json!({"action": "list"}));
    assert!(told.is_empty(), "nothing spent yet: {told:?}");
    let store = Store::open(&s.db).unwrap();
    let m = manager_of(&s, SESSION);
    add(
        &store,
        &[
            thread(&tid(1), m, "/root/a", false),
            thread(&tid(2), m, "/root/b", false),
        ],
    );
    store
        .write(|tx| {
            usage::add(tx, &ThreadId::new(tid(1)), &spent(1000, 150, 50, 0.02), AT)?;
            usage::add(tx, &ThreadId::new(tid(2)), &spent(400, 100, 0, 0.01), AT)
        })
        .unwrap();

    let (_, told) = call(&mut first, json!({"action": "list"}));
    assert_eq!(told.len(), 1, "{told:?}");
    assert_pi_usage(&told[0], 1400, 250, 50, 0.03);
    let (_, told) = call(&mut first, json!({"action": "poll", "id": "/root/a"}));
    assert!(told.is_empty(), "already told: {told:?}");

    store
        .write(|tx| usage::add(tx, &ThreadId::new(tid(1)), &spent(100, 0, 0, 0.005), AT))
        .unwrap();
    let (_, told) = call(&mut first, json!({"action": "poll", "id": "/root/a"}));
    assert_eq!(told.len(), 1, "{told:?}");
    assert_pi_usage(&told[0], 100, 0, 0, 0.005);
    first.close(LONG);

    // A serve that does not report leaves the spend for the next one that does.
    store
        .write(|tx| usage::add(tx, &ThreadId::new(tid(2)), &spent(7, 0, 0, 0.0), AT))
        .unwrap();
    let mut quiet = serve(&s, SESSION, &[], &[]);
    let (_, told) = call(&mut quiet, json!({"action": "list"}));
    assert!(told.is_empty());
    assert!(
        quiet.notifications().iter().all(|n| n["method"] != "usage"),
        "{:?}",
        quiet.notifications()
    );
    quiet.close(LONG);
    let mut again = serve(&s, SESSION, &["--report-usage"], &[]);
    let (_, told) = call(&mut again, json!({"action": "list"}));
    assert_eq!(told.len(), 1, "{told:?}");
    assert_pi_usage(&told[0], 7, 0, 0, 0.0);
    let (_, told) = call(&mut again, json!({"action": "list"}));
    assert!(
        told.is_empty(),
        "a new serve reports nothing twice: {told:?}"
    );
    again.close(LONG);
}

/// A managed child's session is told its subtree's spend without its own (which its parent's
/// session is told): the serve of /root/a (its own thread) hears of /root/a/c only.
#[test]
fn a_childs_session_is_told_its_subtree_without_itself() {
    let s = Scripted::new("spend-subtree");
    let mut root = serve(&s, SESSION, &["--report-usage"], &[]);
    call(&mut root, json!({"action": "list"}));
    let store = Store::open(&s.db).unwrap();
    let m = manager_of(&s, SESSION);
    add(&store, &[thread(&tid(1), m, "/root/a", true)]);
    let mut child = serve(
        &s,
        "ses_child_a",
        &["--report-usage", "--scope-path", "/root/a"],
        &[("PI_THREADS_SELF_ID", &tid(1))],
    );
    call(&mut child, json!({"action": "list"}));
    let cm = manager_of(&s, "ses_child_a");
    add(&store, &[thread(&tid(3), cm, "/root/a/c", false)]);
    store
        .write(|tx| {
            usage::add(tx, &ThreadId::new(tid(1)), &spent(1000, 0, 0, 0.1), AT)?;
            usage::add(tx, &ThreadId::new(tid(3)), &spent(20, 0, 0, 0.002), AT)
        })
        .unwrap();
    let (_, told) = call(&mut child, json!({"action": "list"}));
    assert_eq!(told.len(), 1, "{told:?}");
    assert_pi_usage(&told[0], 20, 0, 0, 0.002);
    let (_, told) = call(&mut root, json!({"action": "list"}));
    assert_eq!(told.len(), 1, "{told:?}");
    assert_pi_usage(&told[0], 1020, 0, 0, 0.102);
    child.close(LONG);
    root.close(LONG);
}

/// poll, wait and list texts carry each thread's own spend (one `Spent:` line after the
/// status; `, <tokens>, $<cost>` on a list line), a thread that spent nothing shows none,
/// a change of a thread's usage reaches its kept answers, and `details` never change.
#[test]
fn poll_wait_and_list_texts_carry_each_threads_spend_and_details_do_not() {
    let s = Scripted::new("spend-texts");
    let mut sv = serve(&s, SESSION, &[], &[]);
    call(&mut sv, json!({"action": "list"}));
    let store = Store::open(&s.db).unwrap();
    let m = manager_of(&s, SESSION);
    add(
        &store,
        &[
            thread(&tid(1), m, "/root/a", false),
            thread(&tid(2), m, "/root/b", false),
        ],
    );
    let (before, _) = call(&mut sv, json!({"action": "poll", "id": "/root/a"}));
    let (list_before, _) = call(&mut sv, json!({"action": "list"}));
    assert!(!text(&before).contains("Spent"), "{}", text(&before));
    // Read twice, so the kept answers exist before the spend changes.
    std::thread::sleep(Duration::from_millis(300));
    call(&mut sv, json!({"action": "poll", "id": "/root/a"}));
    store
        .write(|tx| {
            usage::add(
                tx,
                &ThreadId::new(tid(1)),
                &spent(12_000, 300, 0, 0.01234),
                AT,
            )
        })
        .unwrap();

    // Written by another process: on PostgreSQL the serve hears of it when its notification
    // arrives.
    let (after, _) = crate::support::postgres::read_until_heard(
        || call(&mut sv, json!({"action": "poll", "id": "/root/a"})),
        |(r, _)| text(r).contains("Spent:"),
    );
    assert_eq!(
        text(&after),
        text(&before).replace(
            "Status: closed/stale\n",
            "Status: closed/stale\nSpent: 12.3k tokens, $0.0123\n"
        )
    );
    assert_eq!(after["details"], before["details"]);
    let (waited, _) = call(&mut sv, json!({"action": "wait", "id": "/root/a"}));
    assert!(
        text(&waited).contains("Status: closed/stale\nSpent: 12.3k tokens, $0.0123\nRunning: no"),
        "{}",
        text(&waited)
    );
    let (list_after, _) = call(&mut sv, json!({"action": "list"}));
    assert_eq!(
        text(&list_after),
        format!(
            "a /root/a - closed/stale, 12.3k tokens, $0.0123 [id: {}]\nb /root/b - closed/stale [id: {}]",
            tid(1),
            tid(2)
        )
    );
    assert_eq!(
        text(&list_before),
        format!(
            "a /root/a - closed/stale [id: {}]\nb /root/b - closed/stale [id: {}]",
            tid(1),
            tid(2)
        )
    );
    assert_eq!(list_after["details"], list_before["details"]);
    sv.close(LONG);
}

/// The root session's own turns (`session_usage`, cumulative, never lowered) are part of its
/// tree: `threadbase usage` counts them and says so, and the budget refuses new work once
/// threads and the session's own turns together reach the cap, with a hint that helps.
/// A managed child's session is not recorded (its thread's row counts its turns).
#[test]
fn the_root_sessions_own_turns_count_in_usage_and_the_budget() {
    let s = Scripted::new("spend-own");
    let mut sv = serve(&s, SESSION, &[], &[("THREADBASE_BUDGET_TOKENS", "2000")]);
    call(&mut sv, json!({"action": "list"}));
    let store = Store::open(&s.db).unwrap();
    let m = manager_of(&s, SESSION);
    add(&store, &[thread(&tid(1), m, "/root/a", false)]);
    store
        .write(|tx| usage::add(tx, &ThreadId::new(tid(1)), &spent(900, 100, 0, 0.25), AT))
        .unwrap();
    let own = |input: i64, cost: f64| {
        json!({"input": input, "output": 50, "cacheRead": 0, "cacheWrite": 0, "cost": cost,
               "turns": 3, "toolCalls": 2})
    };
    let id = sv.send("session_usage", own(1200, 0.5));
    assert_eq!(sv.response(id, LONG)["result"], json!({"recorded": true}));
    // A late, smaller report lowers nothing.
    let id = sv.send("session_usage", own(10, 0.0));
    assert_eq!(sv.response(id, LONG)["result"], json!({"recorded": true}));
    let bad = sv.send("session_usage", json!({"input": -1}));
    let bad = sv.response(bad, LONG);
    assert_eq!(bad["error"]["code"], "invalid_params", "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Repair:"),
        "{bad}"
    );

    // 1,000 tokens of threads alone are under the cap; with the session's own 1,250 not.
    let refused = sv.thread_error(json!({"action": "start", "prompt": "more"}));
    assert_eq!(refused["code"], "limit", "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("Budget reached for the thread tree of session {SESSION}: 2,250 tokens spent of THREADBASE_BUDGET_TOKENS=2,000 (1 thread and the session's own turns;")),
        "{message}"
    );
    assert!(
        message.contains("Repair: raise THREADBASE_BUDGET_TOKENS (or unset it) in the environment Pi runs in and restart the session, or start a new tree in a new Pi session (its spend starts at zero); stopping or archiving threads does not lower what was spent"),
        "{message}"
    );
    assert!(
        !message.contains("stop threads you do not need"),
        "{message}"
    );
    sv.close(LONG);

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&s.db)
        .arg("usage")
        .env_remove("THREADBASE_BUDGET_TOKENS")
        .env_remove("THREADBASE_BUDGET_USD")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(
        // The heading ends with the session's start (`· started …`, newest session first).
        out.contains(&format!("tree of session {SESSION}: 1 thread · 2,250 tokens (input 2,100 · output 150 · cache read 0 · cache write 0) · $0.7500 · 4 turns · 2 tool calls · started "))
            && out.contains(&format!("\n  session {SESSION} itself (its own turns, counted in the total): 1,250 tokens (input 1,200 · output 50 · cache read 0 · cache write 0) · $0.5000 · 3 turns · 2 tool calls\n")),
        "{out}"
    );

    // A managed child's own serve: its session is its thread's, not recorded.
    let mut child = serve(
        &s,
        "ses_child_a",
        &["--scope-path", "/root/a"],
        &[("PI_THREADS_SELF_ID", &tid(1))],
    );
    let id = child.send("session_usage", own(5, 0.0));
    assert_eq!(
        child.response(id, LONG)["result"],
        json!({"recorded": false})
    );
    child.close(LONG);
    let conn = crate::support::sql::Conn::open(&s.db).unwrap();
    let rows: Vec<(String, i64)> = conn
        .prepare("SELECT session_id, input_tokens FROM session_usage ORDER BY session_id")
        .unwrap()
        .query_map((), |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows, [(SESSION.to_string(), 1200)]);
}
