//! The Pi extension's own code, run in Node as Pi loads it (support::extension_driver): its
//! line reader's work, and results through its tool call that are exactly serve's contract
//! results although serve sends lists in the compact wire form.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use threadbase::Store;

use crate::support::common::{add, poll, thread};
use crate::support::extension_driver::{self, Driver};
use crate::support::serve_client::{Scripted, Serve};
use crate::support::serve_env;

const SESSION: &str = "ext-session";
/// Top-level threads seeded (past the 200 lines a list text shows, past the 256 a list answers
/// from memory).
const TOP: usize = 300;
/// Children of `/root/t_000`.
const CHILDREN: usize = 5;

/// The Node of tools/pi, or `None` after saying why (a failure under `CI=true`).
fn node_or_skip(test: &str) -> Option<PathBuf> {
    match extension_driver::node() {
        Ok(node) => Some(node),
        Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("{test}: Node and Pi are required under CI=true: {why}")
        }
        Err(why) => {
            eprintln!("SKIPPED {test}: {why}");
            None
        }
    }
}

fn extension() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("pi-extension/index.ts")
}

/// A driver whose extension starts this build's serve on `s`'s database.
fn driver(node: &Path, s: &Scripted) -> Driver {
    Driver::start(
        node,
        &extension(),
        &s.root,
        &[
            (
                "THREADBASE_BIN",
                env!("CARGO_BIN_EXE_threadbase").to_string(),
            ),
            ("THREADBASE_DB", s.db.display().to_string()),
            (
                "PI_CODING_AGENT_DIR",
                s.root.join("agent").display().to_string(),
            ),
            ("THREADBASE_TEST_MARKER", s.marker.clone()),
        ],
        &serve_env::INHERITED,
    )
}

/// A 50 MB line read in 64 KiB chunks is searched once, byte for byte: the reader's work
/// grows with the bytes received, not with their square.
#[test]
fn the_line_reader_scans_each_byte_once() {
    let Some(node) = node_or_skip("the_line_reader_scans_each_byte_once") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut d = Driver::start(&node, &extension(), dir.path(), &[], &[]);
    let bytes = 50_000_000u64;
    let a = d.ask(json!({"op": "lines", "bytes": bytes, "chunk": 65_536}));
    assert_eq!(a["lines"], 1, "{a}");
    assert_eq!(a["length"], bytes, "{a}");
    // Every byte received, the LF included, searched once.
    assert_eq!(a["scanned"], bytes + 1, "{a}");
    d.close();
}

/// Lines split anywhere, a character's UTF-8 bytes included, come out whole; CRLF loses its
/// CR; an unfinished line waits for its LF.
#[test]
fn the_line_reader_joins_lines_split_anywhere() {
    let Some(node) = node_or_skip("the_line_reader_joins_lines_split_anywhere") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut d = Driver::start(&node, &extension(), dir.path(), &[], &[]);
    let text = "é漢字\r\n{\"a\":\"😀\"}\n\nno end yet";
    for chunk in [1, 2, 3, 5, 64] {
        let a = d.ask(json!({"op": "split", "text": text, "chunk": chunk}));
        assert_eq!(
            a["lines"],
            json!(["é漢字", "{\"a\":\"😀\"}", ""]),
            "chunk {chunk}"
        );
        assert_eq!(a["scanned"], text.len(), "chunk {chunk}");
    }
    d.close();
}

/// `TOP` closed threads under /root (every other with an answer whose text needs escaping)
/// and `CHILDREN` under /root/t_000, for the manager serve made for `SESSION`.
fn seed(s: &Scripted) {
    // Serve makes the manager.
    let mut serve = s.serve("none", vec!["--session-id".into(), SESSION.into()], &[]);
    serve.thread(json!({"action": "list"}));
    serve.close(std::time::Duration::from_secs(30));
    let store = Store::open(&s.db).unwrap();
    let conn = rusqlite::Connection::open(&s.db).unwrap();
    let manager: i64 = conn
        .query_row(
            "SELECT id FROM managers WHERE session_id = ?1 AND contract = 'thread'",
            [SESSION],
            |r| r.get(0),
        )
        .unwrap();
    let m = threadbase::domain::ManagerId(manager);
    let mut rows = Vec::new();
    for i in 0..TOP {
        rows.push(thread(
            &format!("thread_{i:012x}"),
            m,
            &format!("/root/t_{i:03}"),
            false,
        ));
    }
    for k in 0..CHILDREN {
        rows.push(thread(
            &format!("thread_c{k:011x}"),
            m,
            &format!("/root/t_000/c_{k}"),
            false,
        ));
    }
    add(&store, &rows);
    for i in (0..TOP).step_by(2) {
        conn.execute(
            "INSERT INTO thread_output (thread_id, last_assistant_text) VALUES (?1, ?2)",
            (
                format!("thread_{i:012x}"),
                format!(
                    "Answer {i}: \"quoted\", a \\ backslash, é and 😀\n{}",
                    "word ".repeat(i)
                ),
            ),
        )
        .unwrap();
    }
}

fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap()
}

/// Through the extension's tool call a list is byte for byte the contract's result that a
/// plain serve writes (its `resultSummary`s and the `snapshots` alias put back, in the
/// contract's key order, `snapshots` the very array `threads` is), while on the pipe serve
/// sent each thread once and without its `resultSummary`.
#[test]
fn a_list_through_the_tool_call_is_the_contract_result() {
    let Some(node) = node_or_skip("a_list_through_the_tool_call_is_the_contract_result") else {
        return;
    };
    let s = Scripted::new("ext-list");
    seed(&s);
    let lists = [
        json!({"action": "list"}),
        json!({"action": "list", "parent": "/root/t_000"}),
        json!({"action": "list", "ancestor": "/root/t_000"}),
        json!({"action": "list", "state": "live"}),
    ];
    // What a plain serve answers (the contract's shape), and the compact wire form.
    let args = |wire: &str| {
        vec![
            "--session-id".to_string(),
            SESSION.to_string(),
            "--wire".to_string(),
            wire.to_string(),
        ]
    };
    let ask_all = |serve: &mut Serve| -> Vec<Value> {
        lists.iter().map(|p| serve.thread(p.clone())).collect()
    };
    let mut plain = s.serve("none", args("contract"), &[]);
    let want = ask_all(&mut plain);
    plain.close(std::time::Duration::from_secs(30));
    let mut compact = s.serve("none", args("compact"), &[]);
    let wire = ask_all(&mut compact);
    compact.close(std::time::Duration::from_secs(30));

    // The contract's answers: the text shows 200 threads and says what it left out.
    let all = &want[0];
    let count = TOP + CHILDREN;
    assert_eq!(all["details"]["count"], count);
    assert_eq!(all["details"]["threads"].as_array().unwrap().len(), count);
    assert_eq!(all["details"]["threads"], all["details"]["snapshots"]);
    let lines: Vec<&str> = text_of(all).lines().collect();
    assert_eq!(lines.len(), 201, "{}", text_of(all));
    assert_eq!(
        lines[200],
        format!("… and {} more not shown: this text lists the first 200 of {count} threads (details.threads has every one). Narrow the list with {{ \"action\": \"list\", \"parent\": \"<path>\" }} or {{ \"action\": \"list\", \"ancestor\": \"<path>\" }}, or run `threadbase list` in a shell.", count - 200)
    );
    assert_eq!(text_of(&want[1]).lines().count(), CHILDREN);
    let with_summary = all["details"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t.get("resultSummary").is_some())
        .count();
    assert_eq!(with_summary, TOP / 2);

    // On the wire: the alias and each resultSummary as the placeholder 0, nothing else changed.
    for (w, c) in want.iter().zip(&wire) {
        let mut expected = w.clone();
        let details = expected["details"].as_object_mut().unwrap();
        details["snapshots"] = 0.into();
        for t in details["threads"].as_array_mut().unwrap() {
            if let Some(summary) = t.get_mut("resultSummary") {
                *summary = 0.into();
            }
        }
        assert_eq!(
            serde_json::to_string(c).unwrap(),
            serde_json::to_string(&expected).unwrap()
        );
    }

    // Through the tool call: the contract's result again, to the byte.
    let mut d = driver(&node, &s);
    d.load(json!({"id": SESSION, "cwd": s.root}));
    for (p, w) in lists.iter().zip(&want) {
        let a = d.call("thread", p.clone());
        assert!(a.get("error").is_none(), "{p}: {a}");
        assert_eq!(a["aliased"], true, "{p}: snapshots is not threads");
        assert_eq!(
            serde_json::to_string(&a["result"]).unwrap(),
            serde_json::to_string(w).unwrap(),
            "{p}"
        );
    }
    // Other results pass through as they came.
    let polled = d.call("thread", json!({"action": "poll", "id": "/root/t_002"}));
    assert_eq!(polled["aliased"], Value::Null);
    assert_eq!(
        polled["result"]["details"]["snapshot"]["resultSummary"],
        polled["result"]["details"]["snapshot"]["result"]["text"]
    );
    assert!(polled["result"]["details"]["snapshot"]["resultSummary"]
        .as_str()
        .unwrap()
        .starts_with("Answer 2: \"quoted\""));
    d.close();
    // The extension's serve exits once its stdin is closed.
    poll(
        std::time::Duration::from_secs(20),
        std::time::Duration::from_millis(50),
        "the extension's serve did not exit",
        || s.leftovers().is_empty().then_some(()),
    );
}

/// The extension puts the children's spend on its tool results as Pi 1.6's `usage` (what serve's
/// `usage` notifications carried, so each token once: the next call carries nothing, a new
/// instance of the same session nothing either), and reports the session's own spend from its
/// entries (assistant messages and other tools' results, not its own tools' results, which are
/// the children's) to `session_usage`.
#[test]
fn tool_results_carry_the_childrens_spend_once_and_the_session_reports_its_own() {
    let Some(node) =
        node_or_skip("tool_results_carry_the_childrens_spend_once_and_the_session_reports_its_own")
    else {
        return;
    };
    let s = Scripted::new("ext-spend");
    let session = "ext-spend-session";
    let mut serve = s.serve("none", vec!["--session-id".into(), session.into()], &[]);
    serve.thread(json!({"action": "list"}));
    serve.close(std::time::Duration::from_secs(30));
    let store = Store::open(&s.db).unwrap();
    let conn = rusqlite::Connection::open(&s.db).unwrap();
    let m: i64 = conn
        .query_row(
            "SELECT id FROM managers WHERE session_id = ?1 AND contract = 'thread'",
            [session],
            |r| r.get(0),
        )
        .unwrap();
    add(
        &store,
        &[thread(
            "thread_00000000e001",
            threadbase::domain::ManagerId(m),
            "/root/spender",
            false,
        )],
    );
    conn.execute(
        "UPDATE thread_usage SET input_tokens = 3000, output_tokens = 300, cache_read_tokens = 30, cost_usd = 0.03, turns = 1 WHERE thread_id = 'thread_00000000e001'",
        [],
    )
    .unwrap();
    let usage = |input: i64, cost: f64| {
        json!({"input": input, "output": 5, "cacheRead": 0, "cacheWrite": 0,
               "totalTokens": input + 5, "cost": {"total": cost}})
    };
    let entries = json!([
        {"type": "message", "message": {"role": "user", "content": "go"}},
        {"type": "message", "message": {"role": "assistant", "usage": usage(1000, 0.01),
         "content": [{"type": "toolCall", "id": "a", "name": "thread", "arguments": {}}]}},
        // The children's spend, told by an earlier call: not the session's own.
        {"type": "message", "message": {"role": "toolResult", "toolName": "thread",
         "usage": usage(99_999, 9.0), "content": []}},
        // Another tool's own model calls are the session's.
        {"type": "message", "message": {"role": "toolResult", "toolName": "summarize",
         "usage": usage(7, 0.001), "content": []}},
    ]);

    let mut d = driver(&node, &s);
    d.load(json!({"id": session, "cwd": s.root, "entries": entries}));
    let first = d.call("thread", json!({"action": "list"}));
    assert!(first.get("error").is_none(), "{first}");
    let u = &first["result"]["usage"];
    assert_eq!(
        (
            &u["input"],
            &u["output"],
            &u["cacheRead"],
            &u["cacheWrite"],
            &u["totalTokens"]
        ),
        (
            &json!(3000),
            &json!(300),
            &json!(30),
            &json!(0),
            &json!(3330)
        ),
        "{first}"
    );
    assert!(
        (u["cost"]["total"].as_f64().unwrap() - 0.03).abs() < 1e-12,
        "{u}"
    );
    assert!(
        text_of(&first["result"]).contains("/root/spender - closed/stale, 3.3k tokens, $0.0300"),
        "{}",
        text_of(&first["result"])
    );
    let second = d.call("thread", json!({"action": "poll", "id": "spender"}));
    assert!(second["result"].get("usage").is_none(), "{second}");
    let own: (i64, i64, f64, i64, i64) = conn
        .query_row(
            "SELECT input_tokens, output_tokens, cost_usd, turns, tool_calls FROM session_usage WHERE session_id = ?1",
            [session],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap();
    assert_eq!((own.0, own.1, own.3, own.4), (1007, 10, 1, 1), "{own:?}");
    assert!((own.2 - 0.011).abs() < 1e-12, "{own:?}");
    // A new instance (a new serve) of the same session is told nothing twice.
    d.load(json!({"id": session, "cwd": s.root, "entries": entries}));
    let again = d.call("thread", json!({"action": "list"}));
    assert!(again["result"].get("usage").is_none(), "{again}");
    d.close();
}

/// Issue 45 item 4: in a session with a UI, the extension starts serve with `--report-status`
/// and each `status` notification becomes `ctx.ui.setStatus("threadbase", text)`: the child's
/// busy turn, then its idle thread with the tree's tokens; shutting the session down removes
/// the entry (`setStatus("threadbase", undefined)`).
#[test]
fn status_notifications_become_the_footers_status_entry() {
    let Some(node) = node_or_skip("status_notifications_become_the_footers_status_entry") else {
        return;
    };
    let s = Scripted::new("ext-status");
    s.script(
        "script",
        &json!({"turns": [{"steps": [{"delay_ms": 1500}, {"text": "done"}]}]}).to_string(),
    );
    let mut d = Driver::start(
        &node,
        &extension(),
        &s.root,
        &[
            (
                "THREADBASE_BIN",
                env!("CARGO_BIN_EXE_threadbase").to_string(),
            ),
            ("THREADBASE_DB", s.db.display().to_string()),
            (
                "PI_CODING_AGENT_DIR",
                s.root.join("agent").display().to_string(),
            ),
            ("THREADBASE_TEST_MARKER", s.marker.clone()),
            (
                "THREADBASE_PI_COMMAND",
                crate::support::serve_client::scripted_command(&s.root.join("script.json")),
            ),
        ],
        &serve_env::INHERITED,
    );
    d.load(json!({"id": "ext-status-session", "cwd": s.root, "ui": true}));
    let started = d.call(
        "thread",
        json!({"action": "start", "prompt": "go", "taskName": "kid"}),
    );
    assert!(started.get("error").is_none(), "{started}");
    let texts = |d: &mut Driver| -> Vec<Value> {
        d.ask(json!({"op": "statuses"}))["statuses"]
            .as_array()
            .unwrap()
            .clone()
    };
    let until = |d: &mut Driver, what: &str, ok: &dyn Fn(&str) -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let all = texts(d);
            if let Some(last) = all.last() {
                assert_eq!(last["key"], "threadbase", "{all:?}");
                if last["text"].as_str().is_some_and(ok) {
                    return;
                }
            }
            assert!(std::time::Instant::now() < deadline, "{what}: {all:?}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    until(&mut d, "busy", &|t| t == "threads: 1 busy");
    until(&mut d, "idle with its tokens", &|t| {
        t.starts_with("threads: 1 idle · ") && t.ends_with(" tokens")
    });
    let shut = d.ask(json!({"op": "shutdown"}));
    let calls = shut["statuses"].as_array().unwrap();
    assert_eq!(
        calls.last().unwrap(),
        &json!({"key": "threadbase", "text": null}),
        "{shut}"
    );
    // Each call changed the entry: serve sends a status only when it changed.
    for pair in calls.windows(2) {
        assert_ne!(pair[0], pair[1], "{shut}");
    }
    d.close();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !s.leftovers().is_empty() {
        assert!(std::time::Instant::now() < deadline, "{:?}", s.leftovers());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The whole argv of process `pid` (its NUL-separated /proc cmdline), as text.
fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Issue 46 item 7: the extension passes the database to serve in the environment, never as
/// `--db`: with `THREADBASE_DB` a PostgreSQL URL holding a password, neither serve's argv nor
/// its child's (what `ps` shows every user of the host) holds the password, and serve still
/// works on that database. The test server trusts every local connection, so it ignores the
/// password the URL adds.
#[test]
fn a_url_password_is_in_no_argv_of_the_serve_the_extension_starts() {
    let test = "a_url_password_is_in_no_argv_of_the_serve_the_extension_starts";
    let Some(node) = node_or_skip(test) else {
        return;
    };
    let Some(schema) = crate::support::postgres::TestSchema::new("ext_no_secret") else {
        return;
    };
    let url = schema.database_url();
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, host) = rest.split_once('@').unwrap();
    let user = user.split(':').next().unwrap();
    let secret = "s3cret-in-argv-never";
    let with_password = format!("{scheme}://{user}:{secret}@{host}");
    let s = Scripted::new("ext-secret");
    s.script(
        "script",
        &json!({"turns": [{"steps": [{"delay_ms": 60_000}, {"text": "done"}]}]}).to_string(),
    );
    let mut d = Driver::start(
        &node,
        &extension(),
        &s.root,
        &[
            (
                "THREADBASE_BIN",
                env!("CARGO_BIN_EXE_threadbase").to_string(),
            ),
            ("THREADBASE_DB", with_password),
            (
                "PI_CODING_AGENT_DIR",
                s.root.join("agent").display().to_string(),
            ),
            ("THREADBASE_TEST_MARKER", s.marker.clone()),
            (
                "THREADBASE_PI_COMMAND",
                crate::support::serve_client::scripted_command(&s.root.join("script.json")),
            ),
        ],
        &["PGPASSWORD", "PGPASSFILE"]
            .into_iter()
            .chain(serve_env::INHERITED)
            .collect::<Vec<_>>(),
    );
    d.load(json!({"id": "ext-secret-session", "cwd": s.root}));
    let started = d.call(
        "thread",
        json!({"action": "start", "prompt": "go", "taskName": "kid"}),
    );
    assert!(started.get("error").is_none(), "{started}");
    // Serve and the child it launched, both running now (the child streams for a minute).
    let argvs: Vec<String> = s.leftovers().into_iter().map(cmdline).collect();
    let serve = argvs.iter().find(|a| a.contains(" serve "));
    let child = argvs.iter().find(|a| a.contains(" scripted-agent "));
    assert!(serve.is_some() && child.is_some(), "{argvs:#?}");
    for argv in &argvs {
        assert!(!argv.contains(secret), "a password in an argv: {argv}");
    }
    assert!(!serve.unwrap().contains("--db"), "{argvs:#?}");
    // Serve worked on the URL's database: the thread's row is in the test's schema.
    let rows = schema
        .block_on(schema.client.query("SELECT path FROM threads", &[]))
        .unwrap();
    let paths: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(paths, vec!["/root/kid".to_string()]);
    d.close();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !s.leftovers().is_empty() {
        assert!(std::time::Instant::now() < deadline, "{:?}", s.leftovers());
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
