use super::*;
use crate::domain::{ManagerId, ThreadState};
use crate::text::compact_cut;
use serde_json::{json, Map};

/// Compares serialized text, so key order is pinned too (`Map` equality ignores it).
fn assert_json(got: &Value, want: &Value) {
    let g = serde_json::to_string_pretty(got).unwrap();
    let w = serde_json::to_string_pretty(want).unwrap();
    assert!(
        g == w,
        "snapshot mismatch\n--- got ---\n{g}\n--- want ---\n{w}"
    );
}

fn live_row() -> ThreadRow {
    ThreadRow {
        id: "thread_0123456789ab".into(),
        manager_id: ManagerId(1),
        path: "/root/api_survey".into(),
        parent_path: Some("/root".into()),
        task_name: "api_survey".into(),
        name: "API survey".into(),
        depth: 1,
        cwd: "/work/proj".into(),
        args: vec!["--model".into(), "anthropic/claude-sonnet-4-5".into()],
        state: ThreadState::Live { phase: Phase::Busy },
        session_file: Some("/s/child.jsonl".into()),
        session_id: Some("sess-1".into()),
        pid: Some(4242),
        pgid: Some(4242),
        owner_pid: Some(100),
        last_seq: 3,
        created_at: "2025-01-01T00:00:00.000Z".into(),
        last_event_at: "2025-01-01T00:00:03.000Z".into(),
        ..ThreadRow::default()
    }
}

fn closed_row(kind: ExitKind) -> ThreadRow {
    let mut r = live_row();
    r.id = "thread_ba9876543210".into();
    r.path = "/root/review/docs".into();
    r.parent_path = Some("/root/review".into());
    r.parent_id = Some("thread_aaaaaaaaaaaa".into());
    r.task_name = "docs".into();
    r.name = "Docs".into();
    r.depth = 2;
    r.args = vec![];
    let mut exit = crate::domain::Exit {
        kind,
        code: None,
        signal: None,
        message: None,
    };
    let phase = match kind {
        ExitKind::Stopped => {
            exit.signal = Some("SIGKILL".into());
            Phase::Idle
        }
        ExitKind::Exited => {
            exit.code = Some(0);
            Phase::Idle
        }
        ExitKind::Failed => {
            exit.message = Some("Child Pi process exited with code 1".into());
            Phase::Failed
        }
        ExitKind::Stale => {
            exit.message = Some("Thread was restored from the parent Pi session registry without a live process connection.".into());
            Phase::Stale
        }
    };
    r.state = ThreadState::Closed { phase, exit };
    r
}

fn ev(seq: i64, kind: &str, data: Value) -> EventRow {
    EventRow {
        seq,
        at: format!("2025-01-01T00:00:{:02}.000Z", seq % 60),
        kind: kind.to_string().into(),
        data: data.to_string(),
    }
}

fn live_events() -> Vec<EventRow> {
    vec![
        ev(1, "thread_started", json!({"pid": 4242})),
        ev(2, "turn_started", json!({})),
        ev(3, "tool_started", json!({"toolName": "read"})),
    ]
}

fn live_out() -> OutputFacts {
    OutputFacts {
        last_assistant_text: Some("Earlier   answer.".into()),
        last_partial_text: Some("  Reading\n\n the   schema  ".into()),
        stderr_tail: b"warning: slow\n".to_vec(),
        stderr_dropped: 0,
        session_name: Some("API survey".into()),
        pending_message_count: Some(0),
    }
}

fn live_common(detail: &str, text: &str) -> Map<String, Value> {
    let v = json!({
        "id": "thread_0123456789ab",
        "path": "/root/api_survey",
        "name": "API survey",
        "taskName": "api_survey",
        "status": "live",
        "phase": "busy",
        "running": true,
        "parentPath": "/root",
        "parentThreadId": null,
        "depth": 1,
        "archived": false,
        "resumable": false,
        "stale": false,
        "cwd": "/work/proj",
        "args": ["--model", "anthropic/claude-sonnet-4-5"],
        "createdAt": "2025-01-01T00:00:00.000Z",
        "lastEventAt": "2025-01-01T00:00:03.000Z",
        "session": {"kind": "known", "file": "/s/child.jsonl", "id": "sess-1", "name": "API survey", "pendingMessageCount": 0},
        "detail": detail,
        "result": {"status": "partial", "source": "assistant_partial", "text": text, "charCount": 26, "truncated": false},
        "resultSummary": text,
        "recentEvents": [
            {"seq": 1, "at": "2025-01-01T00:00:01.000Z", "type": "thread_started", "pid": 4242},
            {"seq": 2, "at": "2025-01-01T00:00:02.000Z", "type": "turn_started"},
            {"seq": 3, "at": "2025-01-01T00:00:03.000Z", "type": "tool_started", "toolName": "read"},
        ],
        "nextSuggestedActions": ["wait", "poll", "send follow_up", "stop"],
        "pid": 4242,
    });
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

#[test]
fn detail_parse_and_names() {
    for d in [Detail::Summary, Detail::Tail, Detail::Full] {
        assert_eq!(Detail::parse(d.as_str()), Some(d));
    }
    assert_eq!(Detail::parse("Summary"), None);
    assert_eq!(Detail::parse(""), None);
    assert_eq!(Detail::default(), Detail::Summary);
}

#[test]
fn live_busy_partial_summary() {
    let got = snapshot(
        &live_row(),
        &live_out(),
        &live_events(),
        Detail::Summary,
        None,
    );
    let want = Value::Object(live_common("summary", "Reading the schema"));
    assert_json(&got, &want);
}

#[test]
fn live_busy_partial_tail() {
    let got = snapshot(&live_row(), &live_out(), &live_events(), Detail::Tail, None);
    let mut want = live_common("tail", "Reading the schema");
    want.insert("outputTail".into(), json!("  Reading\n\n the   schema  "));
    want.insert("outputCharCount".into(), json!(26));
    want.insert("outputTruncated".into(), json!(false));
    want.insert("stderrTail".into(), json!("warning: slow\n"));
    want.insert("stderrTruncated".into(), json!(false));
    assert_json(&got, &Value::Object(want));
}

#[test]
fn live_busy_partial_full() {
    let got = snapshot(&live_row(), &live_out(), &live_events(), Detail::Full, None);
    let mut want = live_common("full", "Reading the schema");
    want.insert("stderrTail".into(), json!("warning: slow\n"));
    want.insert("stderrTruncated".into(), json!(false));
    want.insert("lastAssistantText".into(), json!("Earlier   answer."));
    want.insert(
        "lastPartialText".into(),
        json!("  Reading\n\n the   schema  "),
    );
    assert_json(&got, &Value::Object(want));
}

#[test]
fn live_blank_partial_falls_back_to_assistant_text() {
    let out = OutputFacts {
        last_partial_text: Some(" \n ".into()),
        stderr_tail: b" \n\t".to_vec(),
        ..live_out()
    };
    let got = snapshot(&live_row(), &out, &[], Detail::Full, None);
    assert_json(
        &got["result"],
        &json!({"status": "completed", "source": "assistant_message", "text": "Earlier answer.", "charCount": 17, "truncated": false}),
    );
    // Blank stderr is omitted; the blank partial text is still shown raw at full.
    assert!(got.get("stderrTail").is_none());
    assert!(got.get("stderrTruncated").is_none());
    assert_eq!(got["lastPartialText"], json!(" \n "));
}

/// 800 UTF-16 units: 2 ASCII words and emoji (2 units each), with runs of whitespace.
fn emoji_text() -> String {
    format!("Done:\n\n {}", "😀".repeat(396)) // 5 + 3 + 792 = 800 units
}

fn closed_events() -> Vec<EventRow> {
    vec![
        ev(7, "thread_started", json!({"pid": 9})),
        ev(8, "assistant_message", json!({"text": emoji_text()})),
        ev(9, "thread_stopping", json!({})),
        ev(
            10,
            "thread_closed",
            json!({"exit": {"kind": "stopped", "code": null, "signal": "SIGKILL"}}),
        ),
    ]
}

fn closed_out() -> OutputFacts {
    OutputFacts {
        last_assistant_text: Some(emoji_text()),
        last_partial_text: Some("ignored when closed".into()),
        stderr_tail: vec![],
        stderr_dropped: 0,
        session_name: None,
        pending_message_count: None,
    }
}

fn closed_want(detail: &str, text: &str, truncated: bool, events: Value) -> Map<String, Value> {
    let v = json!({
        "id": "thread_ba9876543210",
        "path": "/root/review/docs",
        "name": "Docs",
        "taskName": "docs",
        "status": "closed",
        "phase": "idle",
        "running": false,
        "parentPath": "/root/review",
        "parentThreadId": "thread_aaaaaaaaaaaa",
        "depth": 2,
        "archived": false,
        "resumable": true,
        "stale": false,
        "cwd": "/work/proj",
        "args": [],
        "createdAt": "2025-01-01T00:00:00.000Z",
        "lastEventAt": "2025-01-01T00:00:03.000Z",
        "session": {"kind": "known", "file": "/s/child.jsonl", "id": "sess-1", "name": null, "pendingMessageCount": null},
        "detail": detail,
        "result": {"status": "completed", "source": "assistant_message", "text": text, "charCount": 800, "truncated": truncated},
        "resultSummary": text,
        "recentEvents": events,
        "nextSuggestedActions": ["resume", "fork", "archive", "list"],
        "exit": {"kind": "stopped", "code": null, "signal": "SIGKILL"},
    });
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

fn closed_events_json(text: &str) -> Value {
    json!([
        {"seq": 7, "at": "2025-01-01T00:00:07.000Z", "type": "thread_started", "pid": 9},
        {"seq": 8, "at": "2025-01-01T00:00:08.000Z", "type": "assistant_message", "text": text},
        {"seq": 9, "at": "2025-01-01T00:00:09.000Z", "type": "thread_stopping"},
        {"seq": 10, "at": "2025-01-01T00:00:10.000Z", "type": "thread_closed",
         "exit": {"kind": "stopped", "code": null, "signal": "SIGKILL"}},
    ])
}

#[test]
fn closed_stopped_emoji_summary() {
    let got = snapshot(
        &closed_row(ExitKind::Stopped),
        &closed_out(),
        &closed_events(),
        Detail::Summary,
        None,
    );
    // Compacted: "Done: " (6) + 396 emoji (792) = 798 units. Cut to 699 units: 6 + 346
    // emoji = 698 (a 347th would split a surrogate pair), then "…".
    let result = format!("Done: {}…", "😀".repeat(346));
    // Event text compacted and cut to 179 units: 6 + 86 emoji = 178, then "…".
    let event = format!("Done: {}…", "😀".repeat(86));
    let want = closed_want("summary", &result, true, closed_events_json(&event));
    assert_json(&got, &Value::Object(want));
}

#[test]
fn closed_stopped_emoji_tail() {
    let got = snapshot(
        &closed_row(ExitKind::Stopped),
        &closed_out(),
        &closed_events(),
        Detail::Tail,
        None,
    );
    // 798 compacted units fit in 1,200.
    let result = format!("Done: {}", "😀".repeat(396));
    // Event text compacted, then cut to 699 units: 6 + 346 emoji = 698, then "…".
    let event = format!("Done: {}…", "😀".repeat(346));
    let mut want = closed_want("tail", &result, false, closed_events_json(&event));
    want.insert("outputTail".into(), json!(emoji_text()));
    want.insert("outputCharCount".into(), json!(800));
    want.insert("outputTruncated".into(), json!(false));
    assert_json(&got, &Value::Object(want));
}

#[test]
fn closed_stopped_emoji_full() {
    let got = snapshot(
        &closed_row(ExitKind::Stopped),
        &closed_out(),
        &closed_events(),
        Detail::Full,
        None,
    );
    let result = format!("Done: {}", "😀".repeat(396));
    let mut want = closed_want("full", &result, false, closed_events_json(&emoji_text()));
    // No stderr; lastPartialText is live-only.
    want.insert("lastAssistantText".into(), json!(emoji_text()));
    assert_json(&got, &Value::Object(want));
}

#[test]
fn long_output_tail_is_cut_with_prefix() {
    // 5,001 units: "x" + 2,500 emoji. The last 4,000 units are 2,000 emoji.
    let text = format!("x{}", "😀".repeat(2_500));
    let out = OutputFacts {
        last_assistant_text: Some(text.clone()),
        ..OutputFacts::default()
    };
    let got = snapshot(&closed_row(ExitKind::Exited), &out, &[], Detail::Tail, None);
    assert_eq!(
        got["outputTail"],
        json!(format!(
            "[truncated first 1001 chars]\n{}",
            "😀".repeat(2_000)
        ))
    );
    assert_eq!(got["outputCharCount"], json!(5_001));
    assert_eq!(got["outputTruncated"], json!(true));
    assert_eq!(
        got["result"]["text"],
        json!(format!("x{}…", "😀".repeat(599))) // tail: 1 + 1,198 units + "…"
    );
    assert_eq!(got["result"]["charCount"], json!(5_001));
    // A 4,000-unit window starting inside a surrogate pair keeps 3,999 units.
    let odd = format!("{}y", "😀".repeat(2_500));
    let out = OutputFacts {
        last_assistant_text: Some(odd),
        ..OutputFacts::default()
    };
    let got = snapshot(&closed_row(ExitKind::Exited), &out, &[], Detail::Tail, None);
    assert_eq!(
        got["outputTail"],
        json!(format!(
            "[truncated first 1002 chars]\n{}y",
            "😀".repeat(1_999)
        ))
    );
}

fn stderr_out() -> OutputFacts {
    // Retention cut 20 bytes, leaving the last two bytes of a 3-byte "€" at the front.
    let mut tail = "€".as_bytes()[1..].to_vec();
    tail.extend_from_slice(format!("{}\n", "e".repeat(4_500)).as_bytes());
    OutputFacts {
        last_assistant_text: None,
        last_partial_text: None,
        stderr_tail: tail,
        stderr_dropped: 20,
        ..OutputFacts::default()
    }
}

#[test]
fn stderr_truncation_tail_and_full() {
    let row = closed_row(ExitKind::Failed);
    let got = snapshot(&row, &stderr_out(), &[], Detail::Tail, None);
    let base = json!({
        "id": "thread_ba9876543210",
        "path": "/root/review/docs",
        "name": "Docs",
        "taskName": "docs",
        "status": "closed",
        "phase": "failed",
        "running": false,
        "parentPath": "/root/review",
        "parentThreadId": "thread_aaaaaaaaaaaa",
        "depth": 2,
        "archived": false,
        "resumable": true,
        "stale": false,
        "cwd": "/work/proj",
        "args": [],
        "createdAt": "2025-01-01T00:00:00.000Z",
        "lastEventAt": "2025-01-01T00:00:03.000Z",
        "session": {"kind": "known", "file": "/s/child.jsonl", "id": "sess-1", "name": null, "pendingMessageCount": null},
        "detail": "tail",
        "result": {"status": "none", "source": "none", "text": null, "charCount": 0, "truncated": false},
        "recentEvents": [],
        "nextSuggestedActions": ["resume", "fork", "archive", "list"],
        "exit": {"kind": "failed", "message": "Child Pi process exited with code 1"},
        // No output text: no outputTail, outputCharCount, outputTruncated.
        // 4,501 retained units, 501 cut by this tail; the 20 bytes retention dropped
        // earlier (and the 2 continuation bytes skipped) are not counted.
        "stderrTail": format!("[truncated first 501 chars]\n{}\n", "e".repeat(3_999)),
        "stderrTruncated": true,
    });
    assert_json(&got, &base);

    let got = snapshot(&row, &stderr_out(), &[], Detail::Full, None);
    let mut want = match base {
        Value::Object(m) => m,
        _ => unreachable!(),
    };
    want["detail"] = json!("full");
    // The retained text as it is, unmarked and not marked truncated.
    want["stderrTail"] = json!(format!("{}\n", "e".repeat(4_500)));
    want["stderrTruncated"] = json!(false);
    assert_json(&got, &Value::Object(want));
}

#[test]
fn stderr_short_but_dropped_and_incomplete_end() {
    // Bytes dropped by retention alone do not mark a tail as truncated (the tail cut
    // nothing from the retained text); an unfinished character at the end is held back.
    let mut tail = b"boom\n".to_vec();
    tail.extend_from_slice(&"😀".as_bytes()[..2]);
    let out = OutputFacts {
        stderr_tail: tail,
        stderr_dropped: 7,
        ..OutputFacts::default()
    };
    let row = closed_row(ExitKind::Exited);
    let got = snapshot(&row, &out, &[], Detail::Tail, None);
    assert_eq!(got["stderrTail"], json!("boom\n"));
    assert_eq!(got["stderrTruncated"], json!(false));
    let got = snapshot(&row, &out, &[], Detail::Full, None);
    assert_eq!(got["stderrTail"], json!("boom\n"));
    assert_eq!(got["stderrTruncated"], json!(false));
    // Summary never shows stderr.
    let got = snapshot(&row, &out, &[], Detail::Summary, None);
    assert!(got.get("stderrTail").is_none());
}

#[test]
fn archived_closed_snapshot() {
    let mut row = closed_row(ExitKind::Stale);
    row.archived = true;
    row.session_file = None;
    row.session_id = None;
    row.parent_path = None;
    row.parent_id = None;
    row.path = "/root/old".into();
    row.task_name = "old".into();
    row.depth = 1;
    let out = OutputFacts {
        last_assistant_text: Some("Final:\tall good".into()),
        ..OutputFacts::default()
    };
    let events = vec![
        ev(41, "turn_completed", json!({})),
        ev(
            42,
            "thread_closed",
            json!({"exit": {"kind": "stale", "message": "gone"}}),
        ),
        ev(43, "thread_archived", json!({"archived": true})),
    ];
    let got = snapshot(&row, &out, &events, Detail::Summary, None);
    let want = json!({
        "id": "thread_ba9876543210",
        "path": "/root/old",
        "name": "Docs",
        "taskName": "old",
        "status": "closed",
        "phase": "stale",
        "running": false,
        "parentPath": "/root",
        "parentThreadId": null,
        "depth": 1,
        "archived": true,
        "resumable": false,
        "stale": true,
        "cwd": "/work/proj",
        "args": [],
        "createdAt": "2025-01-01T00:00:00.000Z",
        "lastEventAt": "2025-01-01T00:00:03.000Z",
        "session": {"kind": "unknown"},
        "detail": "summary",
        "result": {"status": "completed", "source": "assistant_message", "text": "Final: all good", "charCount": 15, "truncated": false},
        "resultSummary": "Final: all good",
        "recentEvents": [
            {"seq": 41, "at": "2025-01-01T00:00:41.000Z", "type": "turn_completed"},
            {"seq": 42, "at": "2025-01-01T00:00:42.000Z", "type": "thread_closed",
             "exit": {"kind": "stale", "message": "gone"}},
            {"seq": 43, "at": "2025-01-01T00:00:43.000Z", "type": "thread_archived", "archived": true},
        ],
        "nextSuggestedActions": ["unarchive", "list"],
        "exit": {"kind": "stale", "message": "Thread was restored from the parent Pi session registry without a live process connection."},
    });
    assert_json(&got, &want);
}

#[test]
fn recent_event_windows_per_detail() {
    let events: Vec<EventRow> = (1..=20)
        .map(|i| {
            ev(
                i,
                "assistant_message",
                json!({"text": format!("m{i}  {}", "a".repeat(800))}),
            )
        })
        .collect();
    let row = live_row();
    let out = OutputFacts::default();
    let seqs = |v: &Value| -> Vec<i64> {
        v["recentEvents"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_i64().unwrap())
            .collect()
    };
    let s = snapshot(&row, &out, &events, Detail::Summary, None);
    assert_eq!(seqs(&s), (16..=20).collect::<Vec<_>>());
    assert_eq!(
        s["recentEvents"][4]["text"],
        json!(format!("m20 {}…", "a".repeat(175)))
    );
    let t = snapshot(&row, &out, &events, Detail::Tail, None);
    assert_eq!(seqs(&t), (9..=20).collect::<Vec<_>>());
    // Compacted first ("m20  " becomes "m20 "), then cut.
    assert_eq!(
        t["recentEvents"][11]["text"],
        json!(format!("m20 {}…", "a".repeat(695)))
    );
    let f = snapshot(&row, &out, &events, Detail::Full, None);
    assert_eq!(seqs(&f), (1..=20).collect::<Vec<_>>());
    assert_eq!(
        f["recentEvents"][19]["text"],
        json!(format!("m20  {}", "a".repeat(800)))
    );
    // No result source at all: text null, no resultSummary.
    assert_json(
        &s["result"],
        &json!({"status": "none", "source": "none", "text": null, "charCount": 0, "truncated": false}),
    );
    assert!(s.get("resultSummary").is_none());
}

#[test]
fn event_data_never_overrides_envelope() {
    let e = ev(
        5,
        "thread_error",
        json!({"type": "x", "seq": 99, "message": "Registry persistence failed: disk"}),
    );
    let got = snapshot(
        &live_row(),
        &OutputFacts::default(),
        &[e],
        Detail::Full,
        None,
    );
    assert_json(
        &got["recentEvents"],
        &json!([{"seq": 5, "at": "2025-01-01T00:00:05.000Z", "type": "thread_error",
                     "message": "Registry persistence failed: disk"}]),
    );
}

/// A `tool_started` row keeps the call's arguments; the snapshot shows the event as
/// pi-threads does, `{seq, at, type, toolName}`, at every detail.
#[test]
fn a_tool_started_events_arguments_stay_in_the_row() {
    let e = ev(
        3,
        "tool_started",
        json!({"toolName": "bash", "args": "{\"command\":\"ls\"}"}),
    );
    for detail in [Detail::Summary, Detail::Tail, Detail::Full] {
        let got = snapshot(
            &live_row(),
            &OutputFacts::default(),
            std::slice::from_ref(&e),
            detail,
            None,
        );
        assert_json(
            &got["recentEvents"],
            &json!([{"seq": 3, "at": "2025-01-01T00:00:03.000Z", "type": "tool_started", "toolName": "bash"}]),
        );
        let shown: Vec<Value> =
            crate::contract::events::RecentEvents::new(std::slice::from_ref(&e), detail)
                .shown()
                .map(|(_, d)| d)
                .collect();
        assert_eq!(shown, [json!({"toolName": "bash"})]);
    }
}

#[test]
fn next_suggested_actions_every_branch() {
    let mut r = live_row();
    r.archived = true;
    assert_eq!(next_suggested_actions(&r), ["unarchive", "poll"]);
    let mut r = closed_row(ExitKind::Exited);
    r.archived = true;
    assert_eq!(next_suggested_actions(&r), ["unarchive", "list"]);
    let r = closed_row(ExitKind::Stopped);
    assert_eq!(
        next_suggested_actions(&r),
        ["resume", "fork", "archive", "list"]
    );
    let mut r = closed_row(ExitKind::Failed);
    r.session_file = None;
    assert_eq!(next_suggested_actions(&r), ["archive", "list"]);
    let mut r = live_row();
    r.state = ThreadState::Live { phase: Phase::Idle };
    assert_eq!(next_suggested_actions(&r), ["send prompt", "poll", "stop"]);
    r.state = ThreadState::Live {
        phase: Phase::Stopping,
    };
    assert_eq!(next_suggested_actions(&r), ["poll", "wait"]);
    for phase in [Phase::Starting, Phase::Busy] {
        r.state = ThreadState::Live { phase };
        assert_eq!(
            next_suggested_actions(&r),
            ["wait", "poll", "send follow_up", "stop"]
        );
    }
}

#[test]
fn exit_json_kinds() {
    assert_eq!(exit_json(&live_row()), None);
    assert_json(
        &exit_json(&closed_row(ExitKind::Exited)).unwrap(),
        &json!({"kind": "exited", "code": 0, "signal": null}),
    );
    assert_json(
        &exit_json(&closed_row(ExitKind::Stopped)).unwrap(),
        &json!({"kind": "stopped", "code": null, "signal": "SIGKILL"}),
    );
    assert_json(
        &exit_json(&closed_row(ExitKind::Failed)).unwrap(),
        &json!({"kind": "failed", "message": "Child Pi process exited with code 1"}),
    );
    let stale = exit_json(&closed_row(ExitKind::Stale)).unwrap();
    assert_eq!(stale["kind"], json!("stale"));
    assert_eq!(stale.as_object().unwrap().len(), 2);
    // A closed row keeps its last pid, but the snapshot shows pid only while live.
    let got = snapshot(
        &closed_row(ExitKind::Exited),
        &OutputFacts::default(),
        &[],
        Detail::Summary,
        None,
    );
    assert!(got.get("pid").is_none());
}

fn facts_with_answer(text: &str) -> ThreadFacts {
    ThreadFacts {
        row: closed_row(ExitKind::Exited),
        out: OutputFacts {
            last_assistant_text: Some(text.to_string()),
            ..OutputFacts::default()
        },
        events: vec![],
        usage: Default::default(),
        pending: Default::default(),
        attention: None,
        worktree: None,
    }
}

fn lines(p: &Projection<'_>) -> String {
    let mut out = String::new();
    p.result_lines(&mut out);
    out
}

/// The model reads the answer with its line breaks (the one improvement on pi-threads'
/// text); `details` keep the contract's compacted text.
#[test]
fn result_lines_keep_line_breaks_and_details_stay_compacted() {
    let answer = "  Findings:\n\n1. The schema is stale.\n2. Two examples fail.\n  ";
    let facts = facts_with_answer(answer);
    let want = [
            (
                Detail::Summary,
                "\n\nResult summary (61 chars):\nFindings:\n\n1. The schema is stale.\n2. Two examples fail.".to_string(),
            ),
            (
                Detail::Tail,
                format!("\n\nAssistant output tail:\n{answer}"),
            ),
            (
                Detail::Full,
                format!("\n\nLast assistant output (full retained):\n{answer}"),
            ),
        ];
    for (detail, text) in want {
        let p = Projection::new(&facts, detail);
        assert_eq!(lines(&p), text, "{detail:?}");
        let got = serde_json::to_value(p.snapshot()).unwrap();
        assert_eq!(
            got["result"]["text"],
            json!("Findings: 1. The schema is stale. 2. Two examples fail."),
            "{detail:?}"
        );
        assert_eq!(got["result"]["text"], got["resultSummary"]);
    }
    // No output text: no result lines.
    assert_eq!(
        lines(&Projection::new(
            &facts_with_answer(" \n "),
            Detail::Summary
        )),
        ""
    );
}

/// A cut summary says so, as pi-threads' label does, and is cut at the same 700
/// characters; a cut tail says so too; `full` is never cut.
#[test]
fn result_lines_say_when_cut() {
    let line = "x".repeat(59) + "\n"; // 60 units a line
    let answer = line.repeat(80) + "end"; // 4,803 units
    let facts = facts_with_answer(&answer);
    let summary = lines(&Projection::new(&facts, Detail::Summary));
    let (label, text) = summary.trim_start().split_once('\n').unwrap();
    assert_eq!(
        label,
        "Result summary (4803 chars, truncated; use detail=tail or detail=full for more):"
    );
    assert_eq!(
        text,
        format!("{}…", crate::text::utf16_prefix(&answer, 699))
    );
    assert_eq!(text.matches('\n').count(), 11, "line breaks kept");
    let tail = lines(&Projection::new(&facts, Detail::Tail));
    assert!(
        tail.starts_with("\n\nAssistant output tail (truncated):\n[truncated first 803 chars]\n"),
        "{tail}"
    );
    let full = lines(&Projection::new(&facts, Detail::Full));
    assert_eq!(
        full,
        format!("\n\nLast assistant output (full retained):\n{answer}")
    );
    // A live partial answer is the current summary.
    let facts = ThreadFacts {
        row: live_row(),
        out: live_out(),
        events: vec![],
        usage: Default::default(),
        pending: Default::default(),
        attention: None,
        worktree: None,
    };
    assert_eq!(
        lines(&Projection::new(&facts, Detail::Summary)),
        "\n\nCurrent assistant summary (26 chars):\nReading\n\n the   schema"
    );
    // The snapshot's result is unchanged by any of this.
    let facts = facts_with_answer(&answer);
    let got = serde_json::to_value(Projection::new(&facts, Detail::Summary).snapshot()).unwrap();
    assert_eq!(got["result"]["charCount"], json!(4_803));
    assert_eq!(got["result"]["text"], json!(compact_cut(&answer, 700)));
}

// ---- golden cases ported from phongndo/pi-threads -----------------------------------

/// pi-threads `test/tool-contract.test.ts` "keeps runtime snapshot detail levels stable":
/// the same thread at each detail level (compared as values: the original's snapshot is
/// printed with sorted keys).
#[test]
fn golden_tool_contract_detail_levels() {
    let mut row = live_row();
    row.id = "thread_012345abcdef".into();
    row.name = "contract child".into();
    row.task_name = "contract_child".into();
    row.path = "/root/contract_child".into();
    row.cwd = "/tmp/project".into();
    row.args = vec!["--model".into(), "sonnet".into()];
    row.created_at = "2026-02-03T04:05:06.000Z".into();
    row.last_event_at = "2026-02-03T04:05:09.000Z".into();
    row.session_file = Some("/tmp/contract-child.jsonl".into());
    row.session_id = Some("session-child".into());
    let out = OutputFacts {
        last_assistant_text: Some("Previous completed answer.".into()),
        last_partial_text: Some("Partial answer\nwith extra spacing".into()),
        stderr_tail: b"stderr line".to_vec(),
        stderr_dropped: 0,
        session_name: Some("Contract child".into()),
        pending_message_count: Some(0),
    };
    let at = |seq: i64, at: &str, kind: &str, data: Value| EventRow {
        seq,
        at: at.into(),
        kind: kind.to_string().into(),
        data: data.to_string(),
    };
    let events = vec![
        at(
            1,
            "2026-02-03T04:05:06.000Z",
            "thread_started",
            json!({"pid": 4242}),
        ),
        at(2, "2026-02-03T04:05:07.000Z", "turn_started", json!({})),
        at(
            3,
            "2026-02-03T04:05:07.100Z",
            "tool_started",
            json!({"toolName": "read"}),
        ),
        at(
            4,
            "2026-02-03T04:05:07.200Z",
            "tool_completed",
            json!({"toolName": "read", "error": true}),
        ),
        at(
            5,
            "2026-02-03T04:05:08.000Z",
            "assistant_message",
            json!({"text": "Assistant event text with\nnewlines"}),
        ),
        at(
            6,
            "2026-02-03T04:05:09.000Z",
            "thread_error",
            json!({"message": "minor stderr noise"}),
        ),
    ];
    let event_json = |compact_text: bool| -> Vec<Value> {
        let text = if compact_text {
            "Assistant event text with newlines"
        } else {
            "Assistant event text with\nnewlines"
        };
        vec![
            json!({"at": "2026-02-03T04:05:06.000Z", "pid": 4242, "seq": 1, "type": "thread_started"}),
            json!({"at": "2026-02-03T04:05:07.000Z", "seq": 2, "type": "turn_started"}),
            json!({"at": "2026-02-03T04:05:07.100Z", "seq": 3, "toolName": "read", "type": "tool_started"}),
            json!({"at": "2026-02-03T04:05:07.200Z", "error": true, "seq": 4, "toolName": "read", "type": "tool_completed"}),
            json!({"at": "2026-02-03T04:05:08.000Z", "seq": 5, "text": text, "type": "assistant_message"}),
            json!({"at": "2026-02-03T04:05:09.000Z", "message": "minor stderr noise", "seq": 6, "type": "thread_error"}),
        ]
    };
    let common = |detail: &str, events: Vec<Value>| {
        json!({
            "archived": false,
            "args": ["--model", "sonnet"],
            "createdAt": "2026-02-03T04:05:06.000Z",
            "cwd": "/tmp/project",
            "depth": 1,
            "detail": detail,
            "id": "thread_012345abcdef",
            "lastEventAt": "2026-02-03T04:05:09.000Z",
            "name": "contract child",
            "nextSuggestedActions": ["wait", "poll", "send follow_up", "stop"],
            "parentPath": "/root",
            "parentThreadId": null,
            "path": "/root/contract_child",
            "phase": "busy",
            "pid": 4242,
            "recentEvents": events,
            "result": {
                "charCount": 33,
                "source": "assistant_partial",
                "status": "partial",
                "text": "Partial answer with extra spacing",
                "truncated": false,
            },
            "resultSummary": "Partial answer with extra spacing",
            "resumable": false,
            "running": true,
            "session": {
                "file": "/tmp/contract-child.jsonl",
                "id": "session-child",
                "kind": "known",
                "name": "Contract child",
                "pendingMessageCount": 0,
            },
            "stale": false,
            "status": "live",
            "taskName": "contract_child",
        })
    };
    let summary = common("summary", event_json(true)[1..].to_vec());
    let mut tail = common("tail", event_json(true));
    tail["outputCharCount"] = json!(33);
    tail["outputTail"] = json!("Partial answer\nwith extra spacing");
    tail["outputTruncated"] = json!(false);
    tail["stderrTail"] = json!("stderr line");
    tail["stderrTruncated"] = json!(false);
    let mut full = common("full", event_json(false));
    full["lastAssistantText"] = json!("Previous completed answer.");
    full["lastPartialText"] = json!("Partial answer\nwith extra spacing");
    full["stderrTail"] = json!("stderr line");
    full["stderrTruncated"] = json!(false);
    assert_eq!(
        snapshot(&row, &out, &events, Detail::Summary, None),
        summary
    );
    assert_eq!(snapshot(&row, &out, &events, Detail::Tail, None), tail);
    assert_eq!(snapshot(&row, &out, &events, Detail::Full, None), full);
}

/// pi-threads `test/thread-manager.test.ts` "keeps default poll details summarized and
/// makes full output explicit": `FIRST\n` + 5,000 × `x` + `\nLAST`.
#[test]
fn golden_summary_truncated_tail_and_full() {
    let long = format!("FIRST\n{}\nLAST", "x".repeat(5_000));
    let out = OutputFacts {
        last_assistant_text: Some(long.clone()),
        ..OutputFacts::default()
    };
    let row = closed_row(ExitKind::Exited);
    let s = snapshot(&row, &out, &[], Detail::Summary, None);
    assert_eq!(s["detail"], json!("summary"));
    assert!(s["resultSummary"].as_str().unwrap().contains("FIRST"));
    assert_eq!(s["result"]["truncated"], json!(true));
    assert!(s.get("lastAssistantText").is_none());
    assert!(s.get("outputTail").is_none());
    let t = snapshot(&row, &out, &[], Detail::Tail, None);
    assert!(t["outputTail"].as_str().unwrap().contains("LAST"));
    assert_eq!(t["outputTruncated"], json!(true));
    assert_eq!(t["result"]["truncated"], json!(true));
    assert!(t.get("lastAssistantText").is_none());
    let f = snapshot(&row, &out, &[], Detail::Full, None);
    assert_eq!(f["lastAssistantText"], json!(long));
    // Full is never cut.
    assert_eq!(f["result"]["truncated"], json!(false));
}

/// `result.truncated` is true exactly when the text is shorter than the compacted source:
/// a long source whose compacted text fits is not truncated.
#[test]
fn result_truncated_compares_with_the_compacted_source() {
    // 1,000 units raw, 700 once compacted: fits the summary's 700.
    let text = format!("{}{}", "a ".repeat(350), " ".repeat(300));
    let out = OutputFacts {
        last_assistant_text: Some(text),
        ..OutputFacts::default()
    };
    let got = snapshot(
        &closed_row(ExitKind::Exited),
        &out,
        &[],
        Detail::Summary,
        None,
    );
    assert_eq!(got["result"]["charCount"], json!(1_000));
    assert_eq!(got["result"]["truncated"], json!(false));
    let out = OutputFacts {
        last_assistant_text: Some("b".repeat(701)),
        ..OutputFacts::default()
    };
    let got = snapshot(
        &closed_row(ExitKind::Exited),
        &out,
        &[],
        Detail::Summary,
        None,
    );
    assert_eq!(got["result"]["truncated"], json!(true));
    let got = snapshot(&closed_row(ExitKind::Exited), &out, &[], Detail::Tail, None);
    assert_eq!(got["result"]["truncated"], json!(false));
}

/// No output text (none, blank, a failed thread without an answer): at `tail` the three
/// output fields are absent, not `""`, `0`, `false`.
#[test]
fn tail_without_output_text_has_no_output_fields() {
    let blank = OutputFacts {
        last_assistant_text: Some(" \n\t ".into()),
        ..OutputFacts::default()
    };
    for (row, out) in [
        (closed_row(ExitKind::Exited), OutputFacts::default()),
        (closed_row(ExitKind::Exited), blank.clone()),
        (closed_row(ExitKind::Failed), OutputFacts::default()),
        (live_row(), blank),
    ] {
        let got = snapshot(&row, &out, &[], Detail::Tail, None);
        for k in ["outputTail", "outputCharCount", "outputTruncated"] {
            assert!(got.get(k).is_none(), "{k} in {got}");
        }
    }
}

/// The case: 12,000 retained stderr bytes after 600 dropped ones. The tail's
/// prefix counts the 8,000 it cut from the retained text, not 8,600.
#[test]
fn stderr_tail_counts_only_its_own_cut() {
    let out = OutputFacts {
        stderr_tail: "s".repeat(12_000).into_bytes(),
        stderr_dropped: 600,
        ..OutputFacts::default()
    };
    let got = snapshot(&closed_row(ExitKind::Exited), &out, &[], Detail::Tail, None);
    assert_eq!(
        got["stderrTail"],
        json!(format!(
            "[truncated first 8000 chars]\n{}",
            "s".repeat(4_000)
        ))
    );
    assert_eq!(got["stderrTruncated"], json!(true));
    let got = snapshot(&closed_row(ExitKind::Exited), &out, &[], Detail::Full, None);
    assert_eq!(got["stderrTail"], json!("s".repeat(12_000)));
    assert_eq!(got["stderrTruncated"], json!(false));
}

/// `session` is `{kind: "unknown"}` without a session file, and `resumable` follows it.
#[test]
fn session_kinds() {
    let mut row = closed_row(ExitKind::Exited);
    let got = snapshot(&row, &OutputFacts::default(), &[], Detail::Summary, None);
    assert_json(
        &got["session"],
        &json!({"kind": "known", "file": "/s/child.jsonl", "id": "sess-1", "name": null, "pendingMessageCount": null}),
    );
    assert_eq!(got["resumable"], json!(true));
    row.session_file = None;
    let got = snapshot(&row, &OutputFacts::default(), &[], Detail::Summary, None);
    assert_json(&got["session"], &json!({"kind": "unknown"}));
    assert_eq!(got["resumable"], json!(false));
    assert_eq!(got["nextSuggestedActions"], json!(["archive", "list"]));
}
