use super::*;
use serde_json::json;

fn parse(name: &str, params: &Value) -> Result<AgentRequest> {
    super::parse(method(name).unwrap(), params)
}

#[test]
fn strict_fields_and_ranges() {
    let e = parse("agent_wait", &json!({"path": "a", "extra": 1})).unwrap_err();
    assert!(
        e.message.contains("unknown field \"extra\""),
        "{}",
        e.message
    );
    assert!(e.message.contains("Repair:"));
    let e = parse("agent_wait", &json!({"path": "a", "timeoutMs": 3_600_001})).unwrap_err();
    assert!(e
        .message
        .contains("timeoutMs must be an integer from 0 to 3600000"));
    assert!(parse("agent_wait", &json!({"path": "a", "timeoutMs": 0})).is_ok());
    let e = parse("agent_update", &json!({"message": ""})).unwrap_err();
    assert!(e.message.contains("1 to 8000"));
    let long = "x".repeat(8_001);
    assert!(parse("agent_update", &json!({"message": long})).is_err());
    let e = parse("agent_output", &json!({"path": "a", "limit": 16_001})).unwrap_err();
    assert!(e
        .message
        .contains("limit must be an integer from 1 to 16000"));
    assert_eq!(
        parse(
            "agent_spawn",
            &json!({"path": "a", "type": "worker", "task": "t"})
        )
        .unwrap(),
        AgentRequest::Spawn(Spawn {
            path: "a".into(),
            task: "t".into(),
            kind: "worker".into(),
            wait: true,
            timeout_ms: None
        })
    );
    assert!(parse(
        "agent_spawn",
        &json!({"path": "a", "type": "worker", "task": 3})
    )
    .is_err());
    assert!(parse("agent_status", &json!([])).is_err());
    assert_eq!(
        parse("agent_status", &Value::Null).unwrap(),
        AgentRequest::Status(Status { path: None })
    );
}

/// `type` is required, as in the original's schema (`type: String({minLength: 1})`).
#[test]
fn spawn_requires_a_type() {
    let e = parse("agent_spawn", &json!({"path": "a", "task": "t"})).unwrap_err();
    assert!(e.message.contains("type is required"), "{}", e.message);
    assert!(e.message.contains("Repair:"), "{}", e.message);
    assert!(e.message.contains(r#""type": "worker""#), "{}", e.message);
    let e = parse(
        "agent_spawn",
        &json!({"path": "a", "type": "", "task": "t"}),
    )
    .unwrap_err();
    assert!(e.message.contains("type must be a name"), "{}", e.message);
}

fn facts(state: AgentState, output: Option<&str>) -> AgentFacts<'_> {
    AgentFacts {
        path: "/root/a",
        parent: Some("/root"),
        kind: "reviewer",
        state,
        task: "t",
        status: STATUS_COMPLETED,
        output,
        error: None,
        session_file: None,
        created_at: 1_764_460_800_000,
        updated_at: 1_764_460_801_234,
        input_tokens: 1200,
        output_tokens: 34,
        cost_usd: 0.0125,
        model: Some("fake/fake-model"),
        thinking_level: Some("low"),
        cost_id: "thread_0123456789ab",
    }
}

#[test]
fn views_cut_output_and_hide_it_outside_completed() {
    let long = "é".repeat(16_001);
    let view = |f: &AgentFacts| serde_json::to_value(view(f)).unwrap();
    let v = view(&facts(AgentState::Completed, Some(&long)));
    assert_eq!(v["outputTruncated"], true);
    assert_eq!(
        (&v["inputTokens"], &v["outputTokens"], &v["costUsd"]),
        (&json!(1200), &json!(34), &json!(0.0125))
    );
    assert_eq!(utf16_len(v["output"].as_str().unwrap()), 16_000);
    assert!(view(&facts(AgentState::Paused, Some(&long)))
        .get("output")
        .is_none());
    let n = settled_notice(
        "/root/a",
        AgentState::Completed,
        "",
        Some(&"a".repeat(16_001)),
    );
    assert!(n.starts_with("Agent /root/a completed. Final answer:\n"));
    assert!(n.ends_with(OUTPUT_TRUNCATED_NOTE));
}

/// The view carries every field of the original's `ThreadView` that threadbase knows, in
/// its declared order: `owner`, `type`, epoch-millisecond times; no `sessionFile` until
/// there is one (absent, never null).
#[test]
fn the_view_has_the_originals_fields_in_its_order() {
    let text = serde_json::to_string(&view(&facts(AgentState::Completed, Some("done")))).unwrap();
    assert_eq!(
        text,
        r#"{"path":"/root/a","parent":"/root","owner":"/root","type":"reviewer","state":"completed","task":"t","status":"Completed; session retained","output":"done","createdAt":1764460800000,"updatedAt":1764460801234,"inputTokens":1200,"outputTokens":34,"model":"fake/fake-model","thinkingLevel":"low","costUsd":0.0125,"costId":"thread_0123456789ab"}"#
    );
    // An independent root reports to the caller that spawned it, the root.
    let mut f = facts(AgentState::Failed, None);
    f.path = "/k";
    f.parent = None;
    f.error = Some("500: model exploded");
    f.status = "500: model exploded";
    f.session_file = Some("/s/k.jsonl");
    let v = serde_json::to_value(view(&f)).unwrap();
    assert_eq!(v["parent"], Value::Null);
    assert_eq!(v["owner"], "/root");
    assert_eq!(v["error"], "500: model exploded");
    assert_eq!(v["sessionFile"], "/s/k.jsonl");
}

/// The original's pseudo-view of the main session (`manager.ts:get("/root")`).
#[test]
fn the_main_session_pseudo_view() {
    assert_eq!(
        serde_json::to_value(main_session_view(42)).unwrap(),
        json!({"path": "/root", "parent": null, "owner": "/root", "type": "main",
                   "state": "running", "task": "Main Pi session", "status": "main",
                   "createdAt": 0, "updatedAt": 42})
    );
}

/// Notices close as the original's do (`index.ts` delivery).
#[test]
fn notices_end_as_the_originals() {
    assert_eq!(
            settled_notice("/root/a", AgentState::Paused, "Need parent input", None),
            "Agent /root/a is paused: Need parent input. No answer handback; send input to resume the same session."
        );
    assert_eq!(
        settled_notice("/root/a", AgentState::Stopped, STATUS_STOPPED, None),
        "Agent /root/a is stopped: Stopped; session retained. Session retained for further input."
    );
    assert_eq!(
        settled_notice("/root/a", AgentState::Failed, "500: model exploded", None),
        "Agent /root/a is failed: 500: model exploded. Session retained for further input."
    );
    assert_eq!(
        settled_notice("/root/a", AgentState::Completed, "", Some("child answer 2")),
        "Agent /root/a completed. Final answer:\nchild answer 2"
    );
}

/// recentOutput: the last 2 assistant texts among the last 6 entries, joined by `\n---\n`,
/// the last 2,000 characters kept.
#[test]
fn recent_output_is_the_last_two_assistant_texts_of_the_last_six_entries() {
    let a = |t: &str| json!({"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": t}]}});
    let u = |t: &str| json!({"type": "message", "message": {"role": "user", "content": t}});
    let entries = vec![
        a("old"),
        u("q"),
        a("one"),
        u("q2"),
        a("two"),
        a("three"),
        u("q3"),
    ];
    assert_eq!(recent_output(&entries), "two\n---\nthree");
    // "old" lies outside the last six entries.
    let entries = vec![a("old"), u("1"), u("2"), u("3"), u("4"), u("5"), a("only")];
    assert_eq!(recent_output(&entries), "only");
    assert_eq!(recent_output(&[]), "");
    let long = "z".repeat(2_500);
    let cut = recent_output(&[a("head"), a(&long)]);
    assert_eq!(utf16_len(&cut), 2_000);
    assert!(timeout_notice("/root/a", 30000, "").ends_with("agent_stop it)."));
    assert!(timeout_notice("/root/a", 30000, "hi").ends_with("Recent output:\nhi"));
}

#[test]
fn output_pages() {
    let output_page = |path, out, offset, limit| {
        serde_json::to_string(&output_page(path, out, offset, limit)).unwrap()
    };
    // The original's keys and values (`tools.ts` agent_output).
    assert_eq!(
        output_page("/root/a", "abcdef", 2, 3),
        r#"{"path":"/root/a","text":"cde","totalCharacters":6,"nextOffset":5}"#
    );
    assert_eq!(
        output_page("/root/a", "abcdef", 4, 3),
        r#"{"path":"/root/a","text":"ef","totalCharacters":6,"nextOffset":null}"#
    );
    assert_eq!(
        output_page("/root/a", "abc", 10, 3),
        r#"{"path":"/root/a","text":"","totalCharacters":3,"nextOffset":null}"#
    );
    assert_eq!(
        output_page("/root/a", "abc", 0, 3),
        r#"{"path":"/root/a","text":"abc","totalCharacters":3,"nextOffset":null}"#
    );
    // Never inside a surrogate pair: "a😀b" is 4 units; a 2-unit page ends after "a".
    assert_eq!(
        output_page("/root/a", "a😀b", 0, 2),
        r#"{"path":"/root/a","text":"a","totalCharacters":4,"nextOffset":1}"#
    );
    // An offset inside the pair starts after it.
    assert_eq!(
        output_page("/root/a", "a😀b", 2, 2),
        r#"{"path":"/root/a","text":"b","totalCharacters":4,"nextOffset":null}"#
    );
}
