//! A child's question reaching its parent (`THREADBASE_UI=parent`, issue 30), end to end with
//! real Pi 1.6: a parent Pi (RPC mode) with `pi-extension/index.ts` starts a real Pi child whose
//! own extension has a tool that calls `ctx.ui.confirm`. The child waits; the parent's `wait`
//! returns with the question; the parent's model answers it through the extension's
//! `thread_answer` tool; the child's confirm resolves to `true` and its run goes on. Skips
//! without Pi unless CI=true.

use crate::support::fake_llm;
use crate::support::pi_child;

use std::time::Duration;

use fake_llm::{content_text, hermetic_pi_env, FakeLlm, Step};
use pi_child::{extension_dir, parent_pi_or_skip, sql, tool_ends};
use serde_json::json;

const ASK_PROMPT: &str = "Clean the cache, but ask first.";
const RUN_TIMEOUT: Duration = Duration::from_secs(180);

/// The child's extension: a tool that asks the user to confirm and reports what it got.
const CHILD_EXTENSION: &str = r#"
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
fn real_pi_childs_confirm_waits_until_the_parent_answers_with_thread_answer() {
    let test = "real_pi_childs_confirm_waits_until_the_parent_answers_with_thread_answer";
    let Some((pi, _serial)) = parent_pi_or_skip(test) else {
        return;
    };
    let fake = FakeLlm::with_script([
        Step::tool_call(
            "thread",
            json!({"action": "start", "prompt": ASK_PROMPT, "taskName": "cleaner"}),
        ),
        Step::tool_call(
            "thread",
            json!({"action": "wait", "id": "/root/cleaner", "timeoutMs": 90000}),
        ),
        Step::tool_call(
            "thread_answer",
            json!({"id": "/root/cleaner", "answer": true}),
        ),
        Step::tool_call(
            "thread",
            json!({"action": "wait", "id": "/root/cleaner", "timeoutMs": 90000}),
        ),
        Step::text("The child cleaned the cache."),
    ]);
    // The child: its first request calls the asking tool; its second (after the tool result)
    // says what the user answered.
    fake.route(
        |r| r.last_user_text().as_deref() == Some(ASK_PROMPT),
        Step::tool_call("ask_user", json!({})),
    );
    fake.route(
        |r| r.last_user_text().as_deref() == Some(ASK_PROMPT),
        Step::text("Cache cleaned after the user confirmed."),
    );
    let env = hermetic_pi_env(&fake);
    let child_ext = env.root.path().join("ask.js");
    std::fs::write(&child_ext, CHILD_EXTENSION).unwrap();
    let db = env.root.path().join("db.sqlite");
    let mut child_command = pi.clone();
    child_command.extend(["-e".to_string(), child_ext.display().to_string()]);
    let mut parent = pi_child::spawn_parent(
        &pi,
        &env,
        &extension_dir().join("index.ts"),
        &db,
        json!(child_command).to_string(),
        &[("THREADBASE_UI", "parent".to_string())],
    );
    let events = parent.run("p1", "Have a child clean the cache.", RUN_TIMEOUT);

    // The parent's model saw the tool (registered only with THREADBASE_UI=parent).
    let parent_requests: Vec<_> = fake
        .completion_requests()
        .into_iter()
        .filter(|r| r.last_user_text().as_deref() != Some(ASK_PROMPT))
        .collect();
    assert!(
        parent_requests[0]
            .tool_names()
            .contains(&"thread_answer".to_string()),
        "{:?}",
        parent_requests[0].tool_names()
    );
    // The first wait came back with the question, and said how to answer it.
    let threads = tool_ends(&events, "thread");
    let first_wait = &threads[1]["result"];
    let snap = &first_wait["details"]["snapshot"];
    assert_eq!(snap["status"], "live", "{first_wait}");
    assert_eq!(snap["question"]["kind"], "confirm", "{first_wait}");
    assert_eq!(
        snap["question"]["title"], "Clean the cache?",
        "{first_wait}"
    );
    assert_eq!(
        snap["question"]["message"], "It deletes 3 files.",
        "{first_wait}"
    );
    let text = content_text(&first_wait["content"]);
    assert!(
        text.contains("Answer with the thread_answer tool"),
        "{text}"
    );
    // The answer went through the extension's tool.
    let answers = tool_ends(&events, "thread_answer");
    assert_eq!(answers.len(), 1, "{events:?}");
    assert_eq!(answers[0]["isError"], false, "{}", answers[0]);
    assert_eq!(
        answers[0]["result"]["details"]["answer"], true,
        "{}",
        answers[0]
    );
    // The child got `true` and went on: its tool result says so, and its run finished.
    let child_requests: Vec<_> = fake
        .completion_requests()
        .into_iter()
        .filter(|r| r.last_user_text().as_deref() == Some(ASK_PROMPT))
        .collect();
    assert_eq!(child_requests.len(), 2, "{child_requests:#?}");
    let tool_result = child_requests[1]
        .messages()
        .iter()
        .map(|m| content_text(&m["content"]))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(tool_result.contains("confirmed: true"), "{tool_result}");
    let second_wait = &threads[2]["result"]["details"]["snapshot"];
    assert_eq!(second_wait["phase"], "idle", "{second_wait}");
    assert_eq!(
        second_wait["result"]["text"], "Cache cleaned after the user confirmed.",
        "{second_wait}"
    );
    assert!(second_wait.get("question").is_none(), "{second_wait}");
    let rows = sql(
        &db,
        "SELECT kind, title, state, answer, answered_by FROM ui_requests",
    );
    assert_eq!(
        rows,
        vec![
            json!({"kind": "confirm", "title": "Clean the cache?", "state": "answered", "answer": "true", "answered_by": "thread_answer"})
        ]
    );
    parent.finish(Duration::from_secs(10));
    let left = env.leftovers_after(Duration::from_secs(20));
    assert!(left.is_empty(), "{left:?}");
}
