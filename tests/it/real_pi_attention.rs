//! What needs the user, told truly, with real Pi 1.6 children (issue 45): a root `serve` whose
//! children are real Pi with `pi-extension/index.ts` (so a child starts children of its own
//! through its own serve), against the loopback fake LLM.
//!
//! - A child that finished its turn and is idle stays `live/idle` when its own child reports
//!   back: the notice delivered into its session is a message that starts no turn (Pi emits
//!   `message_start`/`message_end` and no `agent_start`), which used to make it `live/busy`.
//! - A child's pending question reads `live/asking` on every surface and its parent is told,
//!   with the command that answers it.
//! - A provider error (HTTP 500) reads `live/failed` and its notice names the error; it is
//!   never announced as a finished turn.
//!
//! Skips without Pi unless CI=true.

use crate::support::fake_llm;
use crate::support::serve_client;

use std::path::Path;
use std::time::{Duration, Instant};

use fake_llm::{hermetic_pi_env, pi_or_skip, FakeLlm, PiEnv, Step};
use serde_json::{json, Value};
use serve_client::{serve_with_pi_children, Serve};

const TIMEOUT: Duration = Duration::from_secs(150);

/// One real-Pi test at a time (they share the machine's two cores with the others).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn root_serve(
    env: &PiEnv,
    pi: &[String],
    db: &Path,
    extra: &[&str],
    vars: &[(&str, &str)],
) -> Serve {
    let extension = concat!(env!("CARGO_MANIFEST_DIR"), "/pi-extension/index.ts");
    let mut args = vec!["-e", extension];
    args.extend_from_slice(extra);
    let argv = env.child_command(pi, &args);
    let mut all = env.env.clone();
    all.extend(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    serve_with_pi_children(db, &all, &env.cwd, &argv, "thread", "ses_root")
}

fn cli(db: &Path, args: &[&str]) -> String {
    let out = crate::support::common::threadbase(db, args);
    assert!(
        out.status.success(),
        "threadbase {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The view's word for the thread at `path` (`None`: nothing needs the user).
fn attention(db: &Path, path: &str) -> Option<String> {
    let v: Value = serde_json::from_str(&cli(
        db,
        &[
            "sql",
            "--json",
            &format!("SELECT attention FROM thread_attention WHERE path = '{path}'"),
        ],
    ))
    .unwrap();
    v.as_array()
        .and_then(|rows| rows.first())
        .map(|r| r["attention"].as_str().unwrap().to_string())
}

fn phase(db: &Path, path: &str) -> String {
    let v: Value = serde_json::from_str(&cli(
        db,
        &[
            "sql",
            "--json",
            &format!("SELECT status || '/' || phase AS s FROM threads WHERE path = '{path}'"),
        ],
    ))
    .unwrap();
    v[0]["s"].as_str().unwrap_or("none").to_string()
}

fn until(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + TIMEOUT;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn notice_texts(s: &Serve) -> Vec<String> {
    s.notices()
        .iter()
        .filter_map(|n| n["params"]["text"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn real_pi_an_idle_child_stays_idle_when_its_own_child_reports_back() {
    let Some(pi) = pi_or_skip("real_pi_an_idle_child_stays_idle_when_its_own_child_reports_back")
    else {
        return;
    };
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let fake = FakeLlm::start();
    // /root/lead starts /root/lead/helper through its own serve and ends its turn at once.
    fake.route(
        |r| r.last_is_user("LEAD-TASK"),
        Step::tool_call(
            "thread",
            json!({"action": "start", "taskName": "helper", "prompt": "HELPER-TASK: look around"}),
        ),
    );
    fake.route(
        |r| {
            r.last_tool_result()
                .is_some_and(|t| t.contains("Started Pi thread"))
        },
        Step::text("LEAD-IDLE: the helper runs in the background"),
    );
    // The helper answers a few seconds later, once the lead is idle.
    fake.route(
        |r| r.last_is_user("HELPER-TASK"),
        Step::text_deltas(
            ["HELPER-", "DONE: ", "nothing ", "odd"],
            Duration::from_millis(1000),
        ),
    );
    let env = hermetic_pi_env(&fake);
    let db = env.root.path().join("db.sqlite");
    let mut root = root_serve(&env, &pi, &db, &[], &[]);
    let r = root
        .thread(json!({"action": "start", "taskName": "lead", "prompt": "LEAD-TASK: delegate"}));
    assert!(r["details"]["snapshot"]["id"].is_string(), "{r}");
    until("the lead is idle with the helper started", || {
        phase(&db, "/root/lead") == "live/idle" && phase(&db, "/root/lead/helper") != "none"
    });
    // The helper's notice reaches the lead's session: delivered by the lead's serve.
    until("the helper's notice is delivered to the lead", || {
        cli(
            &db,
            &[
                "sql",
                "SELECT count(*) AS n FROM mailbox m JOIN threads t ON t.id = m.thread_id WHERE t.path = '/root/lead/helper' AND m.kind = 'notice' AND m.state = 'delivered'",
            ],
        )
        .lines()
        .any(|l| l.trim() == "1")
    });
    // The lead's Pi appended it as a message that starts no turn; give its events time to be
    // read, then the lead is still idle on every surface.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(phase(&db, "/root/lead"), "live/idle");
    assert_eq!(attention(&db, "/root/lead"), None);
    let tree = cli(&db, &["tree"]);
    assert!(tree.contains("/root/lead  [live/idle]"), "{tree}");
    let poll = root.thread(json!({"action": "poll", "id": "lead"}));
    let text = poll["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("Status: live/idle"), "{text}");
    root.close(Duration::from_secs(30));
}

/// The child's extension: a tool that asks the user to confirm.
const ASKING_EXTENSION: &str = r#"
export default function (pi) {
  pi.registerTool({
    name: "ask_user",
    label: "Ask the user",
    description: "Ask the user to confirm before cleaning the cache.",
    parameters: { type: "object", properties: {}, additionalProperties: false },
    async execute(_id, _params, _signal, _onUpdate, ctx) {
      const ok = await ctx.ui.confirm("Clean the cache?", "It deletes 3 files.");
      return { content: [{ type: "text", text: `confirmed: ${ok}` }], details: { ok } };
    },
  });
}
"#;

#[test]
fn real_pi_a_question_reads_asking_everywhere_and_the_parent_is_told_how_to_answer() {
    let Some(pi) = pi_or_skip(
        "real_pi_a_question_reads_asking_everywhere_and_the_parent_is_told_how_to_answer",
    ) else {
        return;
    };
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let fake = FakeLlm::start();
    fake.route(
        |r| r.last_is_user("ASK-TASK"),
        Step::tool_call("ask_user", json!({})),
    );
    fake.route(
        |r| {
            r.last_tool_result()
                .is_some_and(|t| t.contains("confirmed:"))
        },
        Step::text("CLEANED after the user confirmed"),
    );
    let env = hermetic_pi_env(&fake);
    let ext = env.root.path().join("ask.js");
    std::fs::write(&ext, ASKING_EXTENSION).unwrap();
    let db = env.root.path().join("db.sqlite");
    let ext_arg = ext.display().to_string();
    let mut root = root_serve(
        &env,
        &pi,
        &db,
        &["-e", &ext_arg],
        &[("THREADBASE_UI", "parent")],
    );
    root.thread(
        json!({"action": "start", "taskName": "cleaner", "prompt": "ASK-TASK: clean the cache"}),
    );
    until("the question is pending", || {
        attention(&db, "/root/cleaner").as_deref() == Some("asking")
    });
    let tree = cli(&db, &["tree"]);
    assert!(tree.contains("/root/cleaner  [live/asking]"), "{tree}");
    let list = root.thread(json!({"action": "list"}));
    let text = list["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("/root/cleaner - live/asking"), "{text}");
    until("the parent's notice", || {
        notice_texts(&root).iter().any(|t| t.contains("needs you"))
    });
    let notice = notice_texts(&root)
        .into_iter()
        .find(|t| t.contains("needs you"))
        .unwrap();
    assert!(
        notice.contains("Clean the cache?")
            && notice.contains("threadbase answer /root/cleaner")
            && notice.contains("thread_answer"),
        "{notice}"
    );
    cli(&db, &["answer", "/root/cleaner", "true"]);
    until("the child settles after the answer", || {
        phase(&db, "/root/cleaner") == "live/idle" && attention(&db, "/root/cleaner").is_none()
    });
    let poll = root.thread(json!({"action": "poll", "id": "cleaner"}));
    assert!(
        poll["details"]["snapshot"]["resultSummary"]
            .as_str()
            .is_some_and(|s| s.contains("CLEANED")),
        "{poll}"
    );
    root.close(Duration::from_secs(30));
}

#[test]
fn real_pi_a_provider_error_reads_failed_and_its_notice_names_the_error() {
    let Some(pi) =
        pi_or_skip("real_pi_a_provider_error_reads_failed_and_its_notice_names_the_error")
    else {
        return;
    };
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let fake = FakeLlm::start();
    fake.route(
        |r| r.last_is_user("FAIL-TASK"),
        Step::error(500, "upstream overloaded"),
    );
    let env = hermetic_pi_env(&fake);
    let db = env.root.path().join("db.sqlite");
    let mut root = root_serve(&env, &pi, &db, &[], &[]);
    root.thread(json!({"action": "start", "taskName": "flaky", "prompt": "FAIL-TASK: try"}));
    until("the failed turn", || {
        attention(&db, "/root/flaky").as_deref() == Some("failed")
    });
    assert_eq!(phase(&db, "/root/flaky"), "live/idle");
    let tree = cli(&db, &["tree"]);
    assert!(tree.contains("/root/flaky  [live/failed]"), "{tree}");
    let poll = root.thread(json!({"action": "poll", "id": "flaky"}));
    let snap = &poll["details"]["snapshot"];
    assert_eq!(snap["attention"]["attention"], "failed", "{poll}");
    let detail = snap["attention"]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("500") && detail.contains("upstream overloaded"),
        "{poll}"
    );
    until("the failure notice", || {
        notice_texts(&root)
            .iter()
            .any(|t| t.contains("failed its turn"))
    });
    let texts = notice_texts(&root);
    let notice = texts
        .iter()
        .find(|t| t.contains("failed its turn"))
        .unwrap();
    assert!(
        notice.contains("live/failed") && notice.contains("upstream overloaded"),
        "{notice}"
    );
    assert!(
        !texts.iter().any(|t| t.contains("finished its turn")),
        "{texts:?}"
    );
    root.close(Duration::from_secs(30));
}
