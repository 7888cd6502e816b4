//! Budgets kept in the database (issue 33, `threadbase budget`): every serve of every host
//! sharing it applies them in the transaction that reserves new work. `team` caps the whole
//! database's spend, `tree` each root session's whole tree as THREADBASE_BUDGET_* do.

use crate::support::serve_client::{Scripted, Serve};

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// `threadbase ARGS` on host `host` with `env`: (exit code, stdout, stderr).
fn cli(db: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_threadbase"));
    c.arg("--db")
        .arg(db)
        .args(args)
        .env("THREADBASE_HOST_ID", "host-a")
        .env_remove("THREADBASE_BUDGET_TOKENS")
        .env_remove("THREADBASE_BUDGET_USD");
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

fn budgets(db: &std::path::Path) -> Value {
    let (code, out, err) = cli(db, &["budget", "--json"], &[]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn base(name: &str) -> Scripted {
    let base = Scripted::new(name);
    base.script("script", &json!({"default_reply": "done"}).to_string());
    base
}

/// A serve of session `session` on host `host`.
fn serve(base: &Scripted, session: &str, host: &str, env: &[(&str, &str)]) -> Serve {
    let mut all = vec![("THREADBASE_HOST_ID", host)];
    all.extend_from_slice(env);
    base.serve("script", vec!["--session-id".into(), session.into()], &all)
}

/// Waits until the database's threads have spent `tokens` in all.
fn until_spent(db: &std::path::Path, tokens: i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = budgets(db);
        let spent = &v["teamSpend"];
        let total = [
            "inputTokens",
            "outputTokens",
            "cacheReadTokens",
            "cacheWriteTokens",
        ]
        .iter()
        .map(|k| spent[k].as_i64().unwrap_or(0))
        .sum::<i64>();
        if total >= tokens {
            return;
        }
        assert!(Instant::now() < deadline, "spent {total} of {tokens}: {v}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn budget_set_show_and_clear_keep_caps_in_the_database_and_bad_input_changes_nothing() {
    let base = base("budget_cli");
    // A serve makes the database.
    let mut s = serve(&base, "ses_a", "host-a", &[]);
    s.thread(json!({"action": "list"}));
    s.close(Duration::from_secs(20));
    let db = base.db.clone();
    let v = budgets(&db);
    assert_eq!(
        (&v["team"], &v["tree"]),
        (&Value::Null, &Value::Null),
        "{v}"
    );

    let (code, out, err) = cli(
        &db,
        &[
            "budget",
            "set",
            "--scope",
            "team",
            "--tokens",
            "2,000,000",
            "--usd",
            "$25",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("team budget set: 2,000,000 tokens · $25.0000 (set ")
            && out.contains(" on host host-a)"),
        "{out}"
    );
    let (code, _, err) = cli(
        &db,
        &["budget", "set", "--scope", "tree", "--usd", "2.5"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let v = budgets(&db);
    assert_eq!(
        (&v["team"]["tokens"], &v["team"]["usd"], &v["team"]["setBy"]),
        (&json!(2_000_000), &json!(25.0), &json!("host-a")),
        "{v}"
    );
    assert_eq!(
        (&v["tree"]["tokens"], &v["tree"]["usd"]),
        (&Value::Null, &json!(2.5))
    );
    let (_, text, _) = cli(&db, &["budget"], &[("THREADBASE_BUDGET_TOKENS", "5000")]);
    assert!(
        text.contains("team budget: 2,000,000 tokens · $25.0000")
            && text.contains("tree budget: $2.5000 (set ")
            && text.contains("this environment: THREADBASE_BUDGET_TOKENS=5,000"),
        "{text}"
    );

    // Bad input: a clear error with a repair, and nothing changed.
    for (args, want) in [
        (
            vec!["budget", "set", "--scope", "everyone", "--tokens", "5"],
            "--scope must be",
        ),
        (
            vec!["budget", "set", "--scope", "team", "--tokens", "-5"],
            "--tokens must be",
        ),
        (
            vec!["budget", "set", "--scope", "team", "--tokens", "lots"],
            "--tokens must be",
        ),
        (
            vec!["budget", "set", "--scope", "team", "--usd", "NaN"],
            "--usd must be",
        ),
        (
            vec!["budget", "set", "--scope", "team"],
            "budget set needs a cap",
        ),
        (vec!["budget", "clear", "--scope", "all"], "--scope must be"),
    ] {
        let (code, _, err) = cli(&db, &args, &[]);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(want) && err.contains("Repair:") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(budgets(&db)["team"]["tokens"], json!(2_000_000));

    let (code, out, _) = cli(&db, &["budget", "clear", "--scope", "team"], &[]);
    assert_eq!(
        (code, out.trim()),
        (0, "team budget cleared: no cap of this scope")
    );
    let (_, out, _) = cli(&db, &["budget", "clear", "--scope", "team"], &[]);
    assert_eq!(out.trim(), "team budget: there was none; nothing changed");
    assert_eq!(budgets(&db)["team"], Value::Null);
}

/// Issue 33's scenario: a team budget reached by spending on both hosts refuses the next
/// start on either, though neither host alone reached it.
#[test]
fn a_team_budget_reached_by_spending_on_two_hosts_refuses_the_next_start_on_either() {
    if !crate::hosts::pid_namespaces_or_skip("a_team_budget_reached_by_spending_on_two_hosts") {
        return;
    }
    let base = base("budget_team");
    let db = base.db.clone();
    // Each host's serve is pid 1 of a PID namespace of its own, as in hosts.rs.
    let serve =
        |session: &str, host: &str| crate::hosts::serve_in_own_pid_namespace(&base, session, host);
    let mut a = serve("ses_a", "host-a");
    let mut b = serve("ses_b", "host-b");
    a.thread(json!({"action": "list"}));
    // Each scripted turn spends 21 tokens: one thread per host is 42 together.
    let (code, _, err) = cli(
        &db,
        &["budget", "set", "--scope", "team", "--tokens", "40"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    a.thread(json!({"action": "start", "prompt": "go", "taskName": "one"}));
    until_spent(&db, 21);
    // Host A alone spent 21 of 40: host B may still start.
    b.thread(json!({"action": "start", "prompt": "go", "taskName": "two"}));
    until_spent(&db, 42);
    for (host, s) in [("host-a", &mut a), ("host-b", &mut b)] {
        let refused =
            s.thread_error(json!({"action": "start", "prompt": "more", "taskName": "three"}));
        assert_eq!(refused["code"], "limit", "{host}: {refused}");
        let message = refused["message"].as_str().unwrap();
        assert!(
            message.starts_with("Team budget reached: this database's spend across every host is 42 tokens of its team budget of 40 tokens")
                && message.contains("2 trees, 2 threads")
                && message.contains("set ")
                && message.contains("on host host-a")
                && message.contains("Repair: raise it with `threadbase budget set --scope team --tokens N`")
                && message.contains("`threadbase budget clear --scope team`"),
            "{host}: {message}"
        );
    }
    let started: i64 = crate::support::sql::count(&db, "SELECT count(*) FROM threads");
    assert_eq!(started, 2, "a refused start writes no row");
    let (_, text, _) = cli(&db, &["budget"], &[]);
    assert!(
        text.contains("spent across every host: 42 tokens") && text.contains("REACHED"),
        "{text}"
    );
    // Raised, the next start goes through on either host.
    cli(
        &db,
        &["budget", "set", "--scope", "team", "--tokens", "1000"],
        &[],
    );
    b.thread(json!({"action": "start", "prompt": "go", "taskName": "three"}));
    a.close(Duration::from_secs(20));
    b.close(Duration::from_secs(20));
}

/// A tree cap kept in the database holds for a serve whose environment sets none; with both,
/// the lower cap is reached first and the refusal names where it came from.
#[test]
fn a_tree_budget_in_the_database_caps_every_serve_and_the_lower_cap_is_reached_first() {
    let base = base("budget_tree");
    let db = base.db.clone();
    let mut a = serve(&base, "ses_a", "host-a", &[]);
    a.thread(json!({"action": "start", "prompt": "go", "taskName": "one"}));
    until_spent(&db, 21);
    // Issue 46: the team's spend counts the turns and tool calls taken (it said 0 turns).
    let spent = &budgets(&db)["teamSpend"];
    let turns = crate::support::sql::count(
        &db,
        "SELECT CAST(coalesce(sum(turns), 0) AS BIGINT) FROM thread_usage",
    );
    assert!(turns >= 1, "{spent}");
    assert_eq!(spent["turns"], turns, "{spent}");
    assert_eq!(spent["toolCalls"], 0, "{spent}");
    cli(
        &db,
        &["budget", "set", "--scope", "tree", "--tokens", "20"],
        &[],
    );
    let refused = a.thread_error(json!({"action": "start", "prompt": "more"}));
    assert_eq!(refused["code"], "limit", "{refused}");
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.starts_with("Budget reached for the thread tree of session ses_a: 21 tokens spent of the database's tree budget of 20 tokens (`threadbase budget`, set ")
            && message.contains("`threadbase budget set --scope tree --tokens N`"),
        "{message}"
    );
    let (_, usage, _) = cli(&db, &["usage"], &[]);
    assert!(
        usage.contains("  tree budget (threadbase budget): 21 of 20 tokens · REACHED: new work in this tree is refused"),
        "{usage}"
    );
    a.close(Duration::from_secs(20));
    // The environment's cap is lower: its own refusal, as before.
    cli(
        &db,
        &["budget", "set", "--scope", "tree", "--tokens", "1000"],
        &[],
    );
    let mut a = serve(
        &base,
        "ses_a",
        "host-a",
        &[("THREADBASE_BUDGET_TOKENS", "10")],
    );
    let refused = a.thread_error(json!({"action": "start", "prompt": "more"}));
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("21 tokens spent of THREADBASE_BUDGET_TOKENS=10"),
        "{message}"
    );
    // Under both caps: it starts.
    a.close(Duration::from_secs(20));
    let mut a = serve(
        &base,
        "ses_a",
        "host-a",
        &[("THREADBASE_BUDGET_TOKENS", "500")],
    );
    a.thread(json!({"action": "start", "prompt": "go", "taskName": "two"}));
    a.close(Duration::from_secs(20));
}
