use super::*;

fn parse(name: &str, params: &Value) -> Result<WorkerRequest> {
    super::parse(method(name).unwrap(), params)
}

#[test]
fn golden_identities() {
    assert_eq!(
        fingerprint("Workstream", "/work", "Verify", None, None),
        "386dfd06102da10f8ca294a78d241e8a33d6921ff86f0615d282a618b140bdcf"
    );
    assert_eq!(
        digest(&json!(["Workstream", "/work", "Verify"])),
        "386dfd06102da10f8ca294a78d241e8a33d6921ff86f0615d282a618b140bdcf"
    );
    let w = worker_identity(&SessionId::new("ses_coord"), "review");
    assert_eq!(w.as_str(), "ses_b47bb7c83655aa899fd1b7f2b4899c1f");
    assert_eq!(
        send_message_id(&w, "k1"),
        "msg_f3793a38a282b806d2a764e3603af485"
    );
    // Empty grants leave the fingerprint as it was; agent and grants change it.
    assert_eq!(
        fingerprint("Workstream", "/work", "Verify", None, Some(&[])),
        fingerprint("Workstream", "/work", "Verify", None, None)
    );
    let with_agent = fingerprint("Workstream", "/work", "Verify", Some("r"), None);
    assert_eq!(
        with_agent,
        digest(&json!(["Workstream", "/work", "Verify", "r"]))
    );
    let with_paths = fingerprint(
        "Workstream",
        "/work",
        "Verify",
        None,
        Some(&["/a".to_string()]),
    );
    assert_eq!(
        with_paths,
        digest(&json!(["Workstream", "/work", "Verify", {"paths": ["/a"]}]))
    );
    // The pair is JSON-encoded, so separators inside ids cannot collide.
    assert_ne!(
        worker_identity(&SessionId::new("ses_a:b"), "c"),
        worker_identity(&SessionId::new("ses_a"), "b:c")
    );
    // Non-ASCII and '/' are hashed unescaped, like JSON.stringify.
    assert_eq!(
        serde_json::to_string(&json!(["é/ü", "\u{2028}"])).unwrap(),
        "[\"é/ü\",\"\u{2028}\"]"
    );
    let m = new_message_id();
    assert!(m.starts_with("msg_") && m.len() == 36);
}

#[test]
fn strict_shapes() {
    let e = parse(
        "threads_spawn",
        &json!({"key": "k", "title": "t", "directory": "/", "task": "x", "extra": 1}),
    )
    .unwrap_err();
    assert!(e.message.starts_with("Invalid threads_spawn parameters: unexpected field extra (allowed: key, title, directory, task, agent, paths). Repair:"), "{}", e.message);
    let e = parse("threads_spawn", &json!({"key": ""})).unwrap_err();
    assert!(
        e.message
            .contains("missing required fields title, directory, task"),
        "{}",
        e.message
    );
    let e = parse(
        "threads_spawn",
        &json!({"key": "", "title": "t", "directory": "/d", "task": "x", "agent": ""}),
    )
    .unwrap_err();
    assert!(e.message.contains("key must be a non-empty string"));
    assert!(e.message.contains("agent must be a non-empty string"));
    let long: String = "é".repeat(201);
    let e = parse(
        "threads_send",
        &json!({"workerID": "ses_x", "key": long, "text": "t"}),
    )
    .unwrap_err();
    assert!(e
        .message
        .contains("key must be at most 200 characters, got 201"));
    // Astral characters count two units each, like JavaScript.
    let e = parse(
        "threads_send",
        &json!({"workerID": "ses_x", "key": "😀".repeat(101), "text": "t"}),
    )
    .unwrap_err();
    assert!(e.message.contains("got 202"));
    let ok = parse(
        "threads_send",
        &json!({"workerID": "ses_x", "key": "any key: / \\ \n 😀", "text": "t"}),
    )
    .unwrap();
    assert!(matches!(ok, WorkerRequest::Send { .. }));
    assert_eq!(
        parse("threads_list", &json!({})).unwrap(),
        WorkerRequest::List
    );
    assert_eq!(
        parse("threads_list", &Value::Null).unwrap(),
        WorkerRequest::List
    );
    assert!(parse("threads_list", &json!({"x": 1})).is_err());
    // paths: [] is absent; more than 16 are refused; items are non-empty strings.
    let r = parse(
        "threads_spawn",
        &json!({"key": "k", "title": "t", "directory": "/d", "task": "x", "paths": []}),
    )
    .unwrap();
    assert!(matches!(
        r,
        WorkerRequest::Spawn(SpawnRequest { paths: None, .. })
    ));
    let many: Vec<String> = (0..17).map(|i| format!("/p{i}")).collect();
    let e = parse(
        "threads_spawn",
        &json!({"key": "k", "title": "t", "directory": "/d", "task": "x", "paths": many}),
    )
    .unwrap_err();
    assert!(e
        .message
        .contains("paths must list at most 16 directories, got 17"));
    let e = parse(
        "threads_spawn",
        &json!({"key": "k", "title": "t", "directory": "/d", "task": "x", "paths": "/a"}),
    )
    .unwrap_err();
    assert!(e.message.contains("paths must be an array of strings"));
}

#[test]
fn reports_and_rpc_inputs() {
    let r = parse(
        "threads_report",
        &json!({"verdict": "PASS WITH NOTES", "summary": "ok", "evidence": []}),
    )
    .unwrap();
    assert_eq!(
        r,
        WorkerRequest::Report(Report {
            verdict: "PASS WITH NOTES".into(),
            summary: "ok".into(),
            evidence: vec![]
        })
    );
    let e = parse(
        "threads_report",
        &json!({"verdict": "OK", "summary": " ", "evidence": [1]}),
    )
    .unwrap_err();
    assert!(e
        .message
        .contains("verdict must be one of PASS, PASS WITH NOTES, FAIL, INCONCLUSIVE; got \"OK\""));
    assert!(e.message.contains("summary must be non-empty text"));
    assert!(e.message.contains("evidence must be an array of strings"));
    let e = parse(
        "threads_report",
        &json!({"verdict": "PASS", "summary": "s"}),
    )
    .unwrap_err();
    assert!(e.message.contains("missing required field evidence"));
    let ids: Vec<String> = (0..101).map(|i| format!("ses_{i}")).collect();
    let e = parse("threads.snapshot", &json!({"coordinatorIDs": ids})).unwrap_err();
    assert!(e.message.contains("at most 100 ids"));
    assert_eq!(
        parse("threads.restore", &json!({"coordinatorIDs": []})).unwrap(),
        WorkerRequest::Restore(Coordinators {
            coordinator_ids: vec![]
        })
    );
    assert!(parse("threads.snapshot", &json!({"input": {}})).is_err());
}

#[test]
fn texts() {
    let r = Report {
        verdict: "FAIL".into(),
        summary: "broken \"x\"".into(),
        evidence: vec!["cargo test: 1 failed".into()],
    };
    assert_eq!(
            report_notice_text("ses_w", "my key", &r),
            "Managed worker ses_w (my key) report:\n{\"verdict\":\"FAIL\",\"summary\":\"broken \\\"x\\\"\",\"evidence\":[\"cargo test: 1 failed\"]}"
        );
    // opzero1/threads `spawn`: the task, a blank line, the worker-instructions paragraph (with
    // `grantNotice(paths)` after its second sentence), and nothing after it.
    const REST: &str = " You may use native subagent for bounded tasks or reviews when useful, within the brief's delegation limits and your permissions. Delegation is optional. Pass relevant context, scope, and constraints to each subagent. Do not call threads_spawn. Review your subagents' results and resolve any outstanding work before reporting. Only you call threads_report with the combined verdict, summary, and evidence; subagents return results to you. Runtime completion alone does not establish task success.";
    assert_eq!(
            worker_prompt("Do it", "/w", Some(&["/a".into(), "/b".into()])),
            format!("Do it\n\nYou are a managed worker assigned to /w. Work only within the assigned scope. You may also use these granted directories when the task requires them: /a, /b.{REST}")
        );
    let expected = format!(
            "Do it\n\nYou are a managed worker assigned to /w. Work only within the assigned scope.{REST}"
        );
    assert_eq!(worker_prompt("Do it", "/w", None), expected);
    assert_eq!(worker_prompt("Do it", "/w", Some(&[])), expected);
}

#[test]
fn models_from_args() {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        model_from_args(&v(&["--model", "anthropic/claude:high"])),
        Some(json!({"providerID": "anthropic", "id": "claude", "variant": "high"}))
    );
    assert_eq!(
        model_from_args(&v(&["--provider", "openai", "--model", "gpt"])),
        Some(json!({"providerID": "openai", "id": "gpt"}))
    );
    assert_eq!(model_from_args(&v(&["--model", "gpt"])), None);
    assert_eq!(model_from_args(&v(&["--thinking", "high"])), None);
}

#[test]
fn views_and_statuses() {
    let mut f = WorkerFacts {
        worker_id: "ses_w".into(),
        coordinator_id: "ses_c".into(),
        key: "k".into(),
        title: None,
        directory: "/d".into(),
        agent: None,
        model: None,
        outcome: None,
        report: None,
        hidden_override: None,
        status: ThreadStatus::Live,
        phase: Phase::Starting,
        queue_position: None,
        unreachable: None,
        attention: None,
        isolation_note: None,
    };
    let v = serde_json::to_value(f.view()).unwrap();
    assert_eq!(
        v.as_object().unwrap().keys().collect::<Vec<_>>(),
        [
            "workerID",
            "coordinatorID",
            "key",
            "title",
            "directory",
            "agent",
            "model",
            "outcome",
            "report",
            "hidden"
        ]
    );
    assert_eq!(v["title"], "k");
    assert_eq!(f.list_status(), "starting");
    f.phase = Phase::Busy;
    assert_eq!(f.list_status(), "running");
    f.phase = Phase::Idle;
    f.outcome = Some(Outcome::Succeeded);
    assert_eq!(f.list_status(), "no report");
    f.outcome = Some(Outcome::Interrupted);
    assert_eq!(f.list_status(), "interrupted");
    f.report = Some(Report {
        verdict: "PASS".into(),
        summary: "s".into(),
        evidence: vec![],
    });
    assert_eq!(f.list_status(), "PASS");
    assert!(f.hidden());
    f.hidden_override = Some(false);
    assert!(!f.hidden());
}
