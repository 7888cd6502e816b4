use super::*;
use serde_json::json;

/// The compact form has the placeholder for exactly the `resultSummary` member's value,
/// whatever its text holds, and setting it to `result.text` gives the snapshot again.
#[test]
fn a_compact_snapshot_has_a_placeholder_for_its_result_summary() {
    for text in [
        "plain",
        "",
        "quote \" and backslash \\ and \\\" and ,\"resultSummary\":\"x\"",
        "é 漢字 \u{1F600} \n\t\u{0}",
    ] {
        let snap = json!({"id": "thread_a", "args": [",\"resultSummary\":\""],
                "result": {"status": "completed", "text": text},
                "resultSummary": text, "recentEvents": [{"text": text}]});
        let full = serde_json::to_string(&snap).unwrap();
        let (before, after) = compact_snapshot(&full).unwrap();
        let sent = format!("{before}{PLACEHOLDER}{after}");
        let mut compact: Value = serde_json::from_str(&sent).unwrap();
        assert_eq!(compact["resultSummary"], 0, "{sent}");
        compact["resultSummary"] = compact["result"]["text"].clone();
        assert_eq!(
            serde_json::to_string(&compact).unwrap(),
            serde_json::to_string(&snap).unwrap()
        );
    }
    // Without the member: unchanged.
    let none = r#"{"id":"thread_a","result":{"text":null}}"#;
    assert_eq!(compact_snapshot(none), None);
}

#[test]
fn send_without_message_matches_the_reference_text() {
    let e = parse(&json!({"action": "send", "id": "x"})).unwrap_err();
    assert_eq!(
        e.message,
        r#"Invalid thread parameters for send: missing required field message. Repair: use the send shape { "action": "send", "id": "/root/inspect_tests", "message": "Continue", "mode": "follow_up" }."#
    );
}

#[test]
fn unexpected_and_missing_fields_are_both_named() {
    let e = parse(&json!({"action": "poll", "prompt": "x", "force": true})).unwrap_err();
    assert!(
            e.message.starts_with("Invalid thread parameters for poll: unexpected fields prompt, force (allowed for poll: id, detail); missing required field id. Repair: use the poll shape"),
            "{}",
            e.message
        );
}

#[test]
fn schema_errors_have_field_hints() {
    let e = parse(&json!({"action": "wait", "id": "x", "timeoutMs": 600001})).unwrap_err();
    assert!(e
        .message
        .contains("timeoutMs must be an integer from 0 to 600000 milliseconds"));
    let e = parse(&json!({"action": "start", "prompt": "", "taskName": "Bad-Name"})).unwrap_err();
    assert!(e.message.contains("prompt must be a non-empty string"));
    assert!(e.message.contains("taskName must be lower_snake_case"));
    let e = parse(&json!({"action": "list", "parent": "a", "ancestor": "b"})).unwrap_err();
    assert!(e.message.contains("mutually exclusive"));
    let e = parse(&json!({"action": "dance"})).unwrap_err();
    assert!(e.message.starts_with(
        "action must be one of start, list, poll, send, stop, wait, resume, fork, archive"
    ));
    assert!(parse(&json!([1])).is_err());
}

#[test]
fn defaults() {
    assert_eq!(
        parse(&json!({"action": "wait", "id": "x"})).unwrap(),
        ThreadRequest::Wait(Wait {
            id: "x".into(),
            detail: Detail::Summary,
            timeout_ms: 30_000
        })
    );
    assert_eq!(
        parse(&json!({"action": "archive", "id": "x"})).unwrap(),
        ThreadRequest::Archive(Archive {
            id: "x".into(),
            archived: true
        })
    );
    assert!(
        matches!(parse(&json!({"action": "fork"})).unwrap(), ThreadRequest::Fork(Fork { position, .. }) if position == ForkPosition::At)
    );
}
