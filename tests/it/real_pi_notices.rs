//! End to end with real Pi 1.6: a parent Pi (RPC mode) with `pi-extension/index.ts` starts two
//! real Pi children through the `thread` tool. When one finishes its turn, and when the other
//! is stopped from a shell with `threadbase stop`, the parent session receives a notice: a
//! custom message (`threadbase-notice`) that Pi appends to the session without starting a
//! turn. Skips without Pi unless CI=true.

use crate::support::fake_llm;
use crate::support::pi_child;

use std::time::Duration;

use fake_llm::{hermetic_pi_env, FakeLlm, Step};
use pi_child::{extension_dir, parent_pi_or_skip, sql, CHILD_ANSWER, CHILD_PROMPT};
use serde_json::{json, Value};

const SLOW_PROMPT: &str = "Take your time.";
/// Two Pi startups and the parent's turn.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
const NOTICE_TIMEOUT: Duration = Duration::from_secs(60);

/// A notice about `path` whose text contains `what`, among the parent's records.
fn is_notice(v: &Value, path: &str, what: &str) -> bool {
    let text = fake_llm::content_text(&v["message"]["content"]);
    v["type"] == "message_end"
        && v["message"]["role"] == "custom"
        && v["message"]["customType"] == "threadbase-notice"
        && text.contains(&format!("({path})"))
        && text.contains(what)
}

#[test]
fn real_pi_parent_is_told_when_a_child_finishes_and_when_threadbase_stop_stops_one() {
    let test = "real_pi_parent_is_told_when_a_child_finishes_and_when_threadbase_stop_stops_one";
    let Some((pi, _serial)) = parent_pi_or_skip(test) else {
        return;
    };
    let fake = FakeLlm::with_script([
        Step::tool_call(
            "thread",
            json!({"action": "start", "prompt": CHILD_PROMPT, "taskName": "magic"}),
        ),
        Step::tool_call(
            "thread",
            json!({"action": "start", "prompt": SLOW_PROMPT, "taskName": "slow"}),
        ),
        Step::text("Both started."),
    ]);
    fake.route(
        |r| r.last_user_text().as_deref() == Some(CHILD_PROMPT),
        Step::text(CHILD_ANSWER),
    );
    fake.route(
        |r| r.last_user_text().as_deref() == Some(SLOW_PROMPT),
        Step::hang(120_000),
    );
    let env = hermetic_pi_env(&fake);
    let db = env.root.path().join("db.sqlite");
    let mut parent = pi_child::spawn_parent(
        &pi,
        &env,
        &extension_dir().join("index.ts"),
        &db,
        json!(pi).to_string(),
        &[],
    );
    parent.run("p1", "Start two background threads.", RUN_TIMEOUT);

    // The child that answered: its notice quotes the answer.
    let done = parent.wait_for_since("the notice of /root/magic", 0, NOTICE_TIMEOUT, |v| {
        is_notice(v, "/root/magic", "finished its turn: live/idle.")
    });
    let text = fake_llm::content_text(&done["message"]["content"]);
    assert!(text.contains(CHILD_ANSWER), "{text}");
    assert_eq!(done["message"]["display"], true, "{done}");

    // The busy child, stopped from a shell: the owning serve carries the stop out and tells
    // the parent.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&db)
        .args(["stop", "/root/slow"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    parent.wait_for("the notice of /root/slow", NOTICE_TIMEOUT, |v| {
        is_notice(v, "/root/slow", "was stopped: closed/stopped.")
    });
    // Neither notice started a turn: the parent's model was asked once per step only.
    assert_eq!(fake.remaining(), 0);
    let parent_requests = fake
        .completion_requests()
        .iter()
        .filter(|r| {
            let last = r.last_user_text();
            last.as_deref() != Some(CHILD_PROMPT) && last.as_deref() != Some(SLOW_PROMPT)
        })
        .count();
    assert_eq!(parent_requests, 3, "{:#?}", fake.completion_requests());
    let rows = sql(
        &db,
        "SELECT t.path, mb.state FROM mailbox mb JOIN threads t ON t.id = mb.thread_id WHERE mb.kind = 'notice' ORDER BY mb.id",
    );
    assert_eq!(
        rows,
        vec![
            json!({"path": "/root/magic", "state": "delivered"}),
            json!({"path": "/root/slow", "state": "delivered"}),
        ],
        "{rows:?}"
    );
    parent.finish(Duration::from_secs(10));
    let left = env.leftovers_after(Duration::from_secs(20));
    assert!(left.is_empty(), "{left:?}");
}
