//! `agent_spawn` of a type the settings define (0.19): the model, thinking level, tools and
//! extensions it chooses, model selection, and the settings that refuse spawns or stop serve.

use super::{call, fail, settings, wait_for, world};
use serde_json::json;
use std::time::Duration;

/// A script whose Pi lists two models with credentials (`fake/m1`, and `fake/think`, which
/// reasons) and whose runs take a while.
fn typed_script(w: &super::World) {
    w.base.script(
        "typed",
        &json!({
            "list_models": [
                {"provider": "fake", "id": "m1"},
                {"provider": "fake", "id": "think", "reasoning": true}
            ],
            "turns": [{"steps": [{"delay_ms": 1200}, {"text": "typed answer"}]}]
        })
        .to_string(),
    );
}

/// The command line of the live child whose session is named `name`.
fn child_cmdline(w: &super::World, name: &str) -> Vec<String> {
    let mut found = Vec::new();
    wait_for("the child's process", Duration::from_secs(10), || {
        for pid in w.base.leftovers() {
            let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let argv: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if argv.windows(2).any(|p| p[0] == "--name" && p[1] == name) {
                found = argv;
                return true;
            }
        }
        false
    });
    found
}

fn after<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    argv.iter()
        .position(|a| a == flag)
        .and_then(|i| argv.get(i + 1))
        .map(String::as_str)
}

/// A type's models are tried in order and the first with credentials (`--list-models`) is
/// taken; its thinking level is clamped to what the model supports; `toolFiltering: allowed`
/// gives the type's allow list minus its block list; the child is launched with Pi's own
/// flags and `-e` for each required extension, and its row and view record the choice.
/// A type whose models are all unavailable fails the spawn with a clear error naming them.
#[test]
fn agent_types_choose_model_thinking_tools_and_extensions() {
    let w = world();
    typed_script(&w);
    let ext = w.base.root.join("ext").join("required.ts");
    std::fs::create_dir_all(ext.parent().unwrap()).unwrap();
    std::fs::write(&ext, "export default function () {}\n").unwrap();
    settings(
        &w,
        &json!({
            "modelSelection": "pick-first-available",
            "requiredChildExtensions": [ext.display().to_string()],
            "agentTypes": {
                "reviewer": {"models": ["nokey/x", "fake/think"], "thinkingLevel": "high",
                             "tools": {"allow": ["read", "bash"], "block": ["bash"]}},
                "plain": {"model": "fake/m1", "thinkingLevel": "high"},
                "broken": {"models": ["nokey/x", "other/y"]}
            }
        }),
    );
    let mut root = w.root("typed", &[]);
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "r", "type": "reviewer", "task": "review", "wait": false}),
    );
    assert_eq!(
        (&v["model"], &v["thinkingLevel"]),
        (&json!("fake/think"), &json!("high")),
        "{v}"
    );
    let argv = child_cmdline(&w, "reviewer /root/r");
    assert_eq!(after(&argv, "--provider"), Some("fake"), "{argv:?}");
    assert_eq!(after(&argv, "--model"), Some("think"), "{argv:?}");
    assert_eq!(after(&argv, "--thinking"), Some("high"), "{argv:?}");
    assert_eq!(after(&argv, "--tools"), Some("read"), "{argv:?}");
    assert_eq!(
        after(&argv, "--extension"),
        Some(ext.to_str().unwrap()),
        "{argv:?}"
    );
    let v = call(&mut root, "agent_wait", json!({"path": "r"}));
    assert_eq!(v["output"], "typed answer");
    // The child's own session records the model it ran with and its thinking level.
    let lines = super::session_lines(std::path::Path::new(v["sessionFile"].as_str().unwrap()));
    assert!(
        lines.iter().any(|e| e["message"]["role"] == "assistant"
            && e["message"]["provider"] == "fake"
            && e["message"]["model"] == "think"),
        "{lines:?}"
    );
    assert!(lines
        .iter()
        .any(|e| e["type"] == "thinking_level_change" && e["thinkingLevel"] == "high"));
    assert_eq!(
        w.sql(
            "SELECT agent_model, agent_thinking, agent_tools FROM threads WHERE path = '/root/r'"
        ),
        vec![vec![
            json!("fake/think"),
            json!("high"),
            json!(r#"{"filtering":"allowed","tools":["read"]}"#)
        ]]
    );
    // m1 does not reason: its thinking level is clamped to off; no allow list: no tools.
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "p", "type": "plain", "task": "t"}),
    );
    assert_eq!(
        (&v["model"], &v["thinkingLevel"]),
        (&json!("fake/m1"), &json!("off")),
        "{v}"
    );
    assert_eq!(
        w.sql("SELECT agent_tools FROM threads WHERE path = '/root/p'")[0][0],
        json!(r#"{"filtering":"allowed","tools":[]}"#)
    );
    // No listed model has credentials: the spawn fails, nothing is reserved.
    let (code, m) = fail(
        &mut root,
        "agent_spawn",
        json!({"path": "b", "type": "broken", "task": "t"}),
    );
    assert_eq!(code, "invalid_params");
    assert!(
        m.starts_with("No model of [nokey/x, other/y] is available"),
        "{m}"
    );
    assert!(w
        .sql("SELECT id FROM threads WHERE path = '/root/b'")
        .is_empty());
    // A type the settings do not define runs with the parent's flags: no model recorded (the
    // main Pi's argv names none), and the thinking level 0.19 resolves (no parent's or main
    // session's level: off).
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "u", "type": "worker", "task": "t"}),
    );
    assert!(v.get("model").is_none(), "{v}");
    assert_eq!(v["thinkingLevel"], "off", "{v}");
    drop(root);
    w.finish(10);
}

/// pick-first-scoped (the default) takes the first listed model in the main session's scope
/// (`--models`); use-current always takes the main session's model.
#[test]
fn scoped_and_current_model_selection() {
    let w = world();
    typed_script(&w);
    settings(
        &w,
        &json!({"agentTypes": {
            "scoped": {"models": ["fake/think", "fake/m1"]},
            "outside": {"models": ["fake/think"]}
        }}),
    );
    let args = r#"["--provider", "fake", "--model", "m1", "--models", "fake/m1"]"#;
    let mut root = w.root_with_args("typed", &[], args);
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "s", "type": "scoped", "task": "t"}),
    );
    assert_eq!(v["model"], "fake/m1", "{v}");
    let (_, m) = fail(
        &mut root,
        "agent_spawn",
        json!({"path": "o", "type": "outside", "task": "t"}),
    );
    assert!(m.starts_with("No model of [fake/think] is available: none has credentials (`pi --list-models`) and is in the main session's scoped models (--models)."), "{m}");
    drop(root);
    settings(
        &w,
        &json!({"modelSelection": "use-current", "agentTypes": {"outside": {"models": ["fake/think"]}}}),
    );
    let mut root = w.root_with_args("typed", &[], args);
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "c", "type": "outside", "task": "t"}),
    );
    assert_eq!(v["model"], "fake/m1", "{v}");
    drop(root);
    w.finish(10);
}

/// requiredChildExtensions: an entry that names nothing refuses every spawn until it is fixed;
/// a settings file with a bad value stops serve at its start with a Repair: hint.
#[test]
fn bad_extensions_refuse_spawns_and_bad_settings_stop_serve() {
    let w = world();
    settings(
        &w,
        &json!({"requiredChildExtensions": ["/nonexistent/ext.ts"]}),
    );
    let mut root = w.root("quick", &[]);
    let (code, m) = fail(
        &mut root,
        "agent_spawn",
        json!({"path": "a", "type": "worker", "task": "t"}),
    );
    assert_eq!(code, "invalid_params");
    assert!(
        m.starts_with("Invalid requiredChildExtensions entry /nonexistent/ext.ts: no such file or folder; subagents will not start until it is fixed. Repair:"),
        "{m}"
    );
    drop(root);
    settings(&w, &json!({"toolFiltering": "some"}));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&w.base.db)
        .args(["serve", "--cwd"])
        .arg(&w.base.root)
        .env("PI_CODING_AGENT_DIR", w.base.root.join("agent"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Invalid subagent settings in ")
            && err.contains(
                "toolFiltering must be allowed, all-except-blocked or all, got \"some\". Repair:"
            ),
        "{err}"
    );
    w.finish(10);
}
