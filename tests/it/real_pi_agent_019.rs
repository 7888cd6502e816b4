//! Contract B's 0.19 additions with real Pi children (fake LLM): an agent type's model and tool
//! flags as the child Pi itself reports them (the model it asks for, the tools it offers, its
//! session file), and a report-only timeout notice reaching a parent Pi while its child keeps
//! working. Skips without Pi unless CI=true.

use crate::support::fake_llm;
use crate::support::serve_client;

use std::path::Path;
use std::time::{Duration, Instant};

use fake_llm::{hermetic_pi_env, pi_or_skip, FakeLlm, Step};
use serde_json::{json, Value};
use serve_client::{serve_with_pi_children, Serve};

fn call(s: &mut Serve, method: &str, params: Value) -> Value {
    let id = s.send(method, params.clone());
    let r = s.response(id, Duration::from_secs(180));
    assert!(
        r.get("error").is_none(),
        "{method} {params} failed: {r}\nserve stderr: {}",
        String::from_utf8_lossy(&s.stderr.lock().unwrap())
    );
    r["result"]["details"].clone()
}

fn session_entries(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn sql(db: &Path, query: &str) -> Vec<Value> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut stmt = conn.prepare(query).unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok(match r.get_ref(0)? {
                rusqlite::types::ValueRef::Null => Value::Null,
                rusqlite::types::ValueRef::Integer(i) => json!(i),
                rusqlite::types::ValueRef::Text(t) => json!(String::from_utf8_lossy(t)),
                _ => json!("?"),
            })
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// A type's first model with credentials (`pi --list-models` lists `fake/fake-alt`, not the
/// key-less `nokey/none`) and its allowed tools reach the child Pi: it asks the fake LLM for
/// that model, offers only those tools, and its session file records the model.
#[test]
fn real_pi_agent_type_runs_with_its_model_and_tools() {
    let Some(pi) = pi_or_skip("real_pi_agent_type_runs_with_its_model_and_tools") else {
        return;
    };
    let fake = FakeLlm::start();
    fake.route(|r| r.last_is_user("R-TASK"), Step::text("reviewed"));
    let env = hermetic_pi_env(&fake);
    // A second model with credentials, and a provider without any.
    let models_path = env.agent_dir.join("models.json");
    let mut models: Value = serde_json::from_slice(&std::fs::read(&models_path).unwrap()).unwrap();
    models["providers"]["fake"]["models"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "fake-alt", "reasoning": false, "input": ["text"], "contextWindow": 128000, "maxTokens": 4096}));
    models["providers"]["nokey"] = json!({
        "baseUrl": fake.base_url(), "api": "openai-completions",
        "models": [{"id": "none"}]
    });
    std::fs::write(&models_path, models.to_string()).unwrap();
    std::fs::write(
        env.agent_dir.join("threadbase-agents.json"),
        json!({
            "modelSelection": "pick-first-available",
            "agentTypes": {"reviewer": {
                "models": ["nokey/none", "fake/fake-alt"], "thinkingLevel": "low",
                "tools": {"allow": ["read", "agent_update"], "block": []}
            }}
        })
        .to_string(),
    )
    .unwrap();
    let _reaper = fake_llm::Reaper(&env);
    let extension = concat!(env!("CARGO_MANIFEST_DIR"), "/pi-extension/index.ts");
    let argv = env.child_command(&pi, &["-e", extension]);
    let db = env.root.path().join("db.sqlite");
    let mut root = serve_with_pi_children(&db, &env.env, &env.cwd, &argv, "agent", "ses_root");

    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "r", "type": "reviewer", "task": "R-TASK: review the diff"}),
    );
    assert_eq!(v["state"], "completed", "{v}");
    assert_eq!(v["output"], "reviewed");
    // fake-alt does not reason: the type's "low" is clamped to off.
    assert_eq!(
        (&v["model"], &v["thinkingLevel"]),
        (&json!("fake/fake-alt"), &json!("off")),
        "{v}"
    );
    // What the child Pi itself asked the model for, and offered it.
    let asked = fake
        .completion_requests()
        .into_iter()
        .find(|r| r.last_is_user("R-TASK"))
        .expect("the child asked the model");
    assert_eq!(asked.json()["model"], "fake-alt");
    let mut tools = asked.tool_names();
    tools.sort();
    assert_eq!(tools, ["agent_update", "read"]);
    // Its own session file records the model and thinking level it ran with.
    let file = v["sessionFile"].as_str().unwrap();
    let entries = session_entries(Path::new(file));
    assert!(
        entries.iter().any(|e| e["type"] == "model_change"
            && e["provider"] == "fake"
            && e["modelId"] == "fake-alt"),
        "{entries:?}"
    );
    assert!(
        entries
            .iter()
            .any(|e| e["type"] == "thinking_level_change" && e["thinkingLevel"] == "off"),
        "{entries:?}"
    );
    assert!(root.close(Duration::from_secs(60)).success());
    let left = env.leftovers_after(Duration::from_secs(15));
    assert!(left.is_empty(), "leftover processes: {left:?}");
}

/// A real Pi child (/root/a) spawns /root/a/b detached with `timeoutMs`; when it passes while
/// b still runs its shell command, a's Pi gets the `timeout` notice (a custom message in its
/// session) from its own serve, b is not stopped and goes on to its answer.
/// (`THREADBASE_TEST_TIMEOUT_DIVISOR=100`: 30 s fire after 300 ms.)
#[test]
fn real_pi_timeout_notice_reaches_the_parent_pi_while_the_child_works() {
    let Some(pi) = pi_or_skip("real_pi_timeout_notice_reaches_the_parent_pi_while_the_child_works")
    else {
        return;
    };
    let fake = FakeLlm::start();
    fake.route(
        |r| r.last_is_user("A-TASK"),
        Step::tool_call(
            "agent_spawn",
            json!({"path": "b", "type": "worker", "task": "B-TASK: dig", "wait": false, "timeoutMs": 30000}),
        ),
    );
    fake.route(
        |r| {
            r.messages().last().is_some_and(|m| m["role"] == "tool")
                && r.last_user_text().is_some_and(|t| t.contains("A-TASK"))
        },
        Step::text("A: b is on it"),
    );
    fake.route(
        |r| r.last_is_user("B-TASK"),
        Step::bash("sleep 4; echo dug"),
    );
    fake.route(
        |r| {
            r.messages().last().is_some_and(|m| m["role"] == "tool")
                && r.last_user_text().is_some_and(|t| t.contains("B-TASK"))
        },
        Step::text("B final: dug"),
    );
    let mut env = hermetic_pi_env(&fake);
    env.env
        .push(("THREADBASE_TEST_TIMEOUT_DIVISOR".into(), "100".into()));
    let _reaper = fake_llm::Reaper(&env);
    let extension = concat!(env!("CARGO_MANIFEST_DIR"), "/pi-extension/index.ts");
    let argv = env.child_command(&pi, &["-e", extension]);
    let db = env.root.path().join("db.sqlite");
    let mut root = serve_with_pi_children(&db, &env.env, &env.cwd, &argv, "agent", "ses_root");

    let a = call(
        &mut root,
        "agent_spawn",
        json!({"path": "a", "type": "worker", "task": "A-TASK: delegate the dig"}),
    );
    assert_eq!(a["output"], "A: b is on it", "{a}");
    let a_file = a["sessionFile"].as_str().unwrap().to_string();
    // The notice reaches a's Pi (its session gets the custom message) while b still works.
    let deadline = Instant::now() + Duration::from_secs(60);
    let notice = loop {
        let found = session_entries(Path::new(&a_file)).into_iter().find(|e| {
            e["type"] == "custom_message"
                && e["customType"] == "threadbase-notice"
                && e["details"]["kind"] == "timeout"
        });
        if let Some(n) = found {
            break n;
        }
        assert!(
            Instant::now() < deadline,
            "no timeout notice in a's session; serve stderr: {}",
            String::from_utf8_lossy(&root.stderr.lock().unwrap())
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let b_state = sql(
        &db,
        "SELECT agent_state FROM threads WHERE path = '/root/a/b'",
    );
    assert_eq!(b_state, [json!("running")], "b when a got the notice");
    assert_eq!(notice["details"]["path"], "/root/a/b", "{notice}");
    assert_eq!(notice["details"]["timeoutMs"], 30000, "{notice}");
    assert!(
        notice["content"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Agent /root/a/b is still running after its timeout of 30000 ms"),
        "{notice}"
    );
    // b was not stopped: it finishes its command and answers.
    let b = call(
        &mut root,
        "agent_wait",
        json!({"path": "/root/a/b", "timeoutMs": 120000}),
    );
    assert_eq!(
        (&b["state"], &b["output"]),
        (&json!("completed"), &json!("B final: dug")),
        "{b}"
    );
    let fired = sql(
        &db,
        "SELECT count(*) FROM mailbox mb JOIN threads t ON t.id = mb.thread_id
         WHERE t.path = '/root/a/b' AND mb.send_key LIKE 'timeout:%'",
    );
    assert_eq!(fired, [json!(1)]);
    assert!(root.close(Duration::from_secs(60)).success());
    let left = env.leftovers_after(Duration::from_secs(15));
    assert!(left.is_empty(), "leftover processes: {left:?}");
}

/// `/agents reap` in a real parent Pi (the extension's command): it counts the completed
/// subagents, asks Confirm/Cancel, forgets them on Confirm and says how many; the row stays,
/// marked reaped.
#[test]
fn real_pi_agents_reap_command_counts_confirms_and_forgets() {
    use crate::support::pi_child;
    let test = "real_pi_agents_reap_command_counts_confirms_and_forgets";
    let steps = [
        Step::tool_call(
            "agent_spawn",
            json!({"path": "done", "type": "worker", "task": "finish quickly"}),
        ),
        Step::text("Spawned."),
    ];
    let Some((pi, _fake, env)) = pi_child::pi_with_steps(test, steps) else {
        return;
    };
    let _one = pi_child::one_parent_at_a_time();
    let _reaper = fake_llm::Reaper(&env);
    let db = env.root.path().join("db.sqlite");
    let extension = pi_child::extension_dir().join("index.ts");
    let mut p = pi_child::spawn_parent(
        &pi,
        &env,
        &extension,
        &db,
        pi_child::busy_child_command(&env, 100),
        &[("THREADBASE_TOOLS", "agent".to_string())],
    );
    let step = Duration::from_secs(120);
    let events = p.run("p1", "Spawn a quick subagent.", step);
    let end = pi_child::tool_ends(&events, "agent_spawn")[0];
    assert_eq!(end["result"]["details"]["state"], "completed", "{end}");
    p.send(&json!({"id": "r1", "type": "prompt", "message": "/agents reap"}));
    let ask = p.ui_request("select", step);
    assert_eq!(
        ask["title"],
        "Reap 1 completed subagent? They are forgotten and cannot be resumed; their session files stay."
    );
    assert_eq!(pi_child::strings(&ask["options"]), ["Confirm", "Cancel"]);
    p.answer_ui(&ask, json!({"value": "Confirm"}));
    let said = p.ui_request("notify", step);
    assert_eq!(said["message"], "Reaped 1 subagent.", "{said}");
    let reaped = sql(
        &db,
        "SELECT agent_reaped_at IS NOT NULL FROM threads WHERE path = '/root/done'",
    );
    assert_eq!(reaped, [json!(1)]);
    // Nothing left to reap: said so, no dialog.
    p.send(&json!({"id": "r2", "type": "prompt", "message": "/agents reap"}));
    let said = p.ui_request("notify", step);
    assert_eq!(said["message"], "No completed subagents to reap.", "{said}");
    p.finish(Duration::from_secs(10));
    let left = env.leftovers_after(Duration::from_secs(20));
    assert!(left.is_empty(), "leftover processes: {left:?}");
}
