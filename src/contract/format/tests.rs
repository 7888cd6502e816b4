use super::*;
use crate::contract::projection::{Detail, OutputFacts, ThreadFacts};
use crate::domain::{Exit, ExitKind, ManagerId, Phase, ThreadState};
use crate::store::events::EventRow;
use crate::store::threads::ThreadRow;

/// pi-threads `test/format.test.ts`'s `liveThread()`: idle, pid 123, session unknown.
fn live() -> ThreadRow {
    ThreadRow {
        id: "thread_012345abcdef".into(),
        manager_id: ManagerId(1),
        path: "/root/inspect_repo".into(),
        parent_path: Some("/root".into()),
        task_name: "inspect_repo".into(),
        name: "inspect_repo".into(),
        depth: 1,
        cwd: "/tmp/project".into(),
        state: ThreadState::Live { phase: Phase::Idle },
        pid: Some(123),
        pgid: Some(123),
        created_at: "2026-01-01T00:00:00.000Z".into(),
        last_event_at: "2026-01-01T00:00:00.000Z".into(),
        ..ThreadRow::default()
    }
}

/// Its `closedThread()`: exited with code 0.
fn closed() -> ThreadRow {
    let mut r = live();
    r.state = ThreadState::Closed {
        phase: r.phase(),
        exit: Exit {
            kind: ExitKind::Exited,
            code: Some(0),
            signal: None,
            message: None,
        },
    };
    r
}

fn facts(row: ThreadRow, out: OutputFacts) -> ThreadFacts {
    ThreadFacts {
        row,
        out,
        events: vec![],
        usage: Default::default(),
        pending: Default::default(),
        attention: None,
        worktree: None,
    }
}

fn with<T>(f: &ThreadFacts, detail: Detail, g: impl FnOnce(&Projection<'_>) -> T) -> T {
    g(&Projection::new(f, detail))
}

fn title_of(f: &ThreadFacts) -> String {
    with(f, Detail::Summary, |p| title(&p.snapshot()).into_owned())
}

fn status_of(f: &ThreadFacts) -> String {
    with(f, Detail::Summary, |p| status(&p.snapshot()))
}

#[test]
fn golden_titles() {
    // "prefers generated session names for display titles"
    let mut row = live();
    row.session_file = Some("/tmp/session.jsonl".into());
    row.session_id = Some("session-1".into());
    let out = OutputFacts {
        session_name: Some("Review failing tests".into()),
        ..OutputFacts::default()
    };
    assert_eq!(title_of(&facts(row, out)), "Review failing tests");
    // "falls back to humanized task names instead of opaque ids"
    let mut row = live();
    row.id = "thread_111111111111".into();
    row.name = "thread_111111111111".into();
    row.task_name = "review_tests".into();
    row.path = "/root/review_tests".into();
    assert_eq!(
        title_of(&facts(row, OutputFacts::default())),
        "review tests"
    );
    // A display name that is neither id nor taskName wins over the taskName.
    let mut row = live();
    row.name = "  Inspect the repo ".into();
    assert_eq!(
        title_of(&facts(row, OutputFacts::default())),
        "Inspect the repo"
    );
    // The session name only counts for a known session; a blank one does not.
    let out = OutputFacts {
        session_name: Some("Ignored".into()),
        ..OutputFacts::default()
    };
    assert_eq!(title_of(&facts(live(), out)), "inspect repo");
}

#[test]
fn golden_state_texts() {
    // "renders one canonical state text for live and closed threads" (with the pid the
    // result texts add to a live one).
    let mut busy = live();
    busy.state = ThreadState::Live { phase: Phase::Busy };
    assert_eq!(
        status_of(&facts(busy, OutputFacts::default())),
        "live/busy pid=123"
    );
    assert_eq!(
        status_of(&facts(closed(), OutputFacts::default())),
        "closed/exited"
    );
    let mut stale = closed();
    stale.state.exit_mut().unwrap().kind = ExitKind::Stale;
    stale.state.exit_mut().unwrap().message = Some("restored".into());
    assert_eq!(
        status_of(&facts(stale, OutputFacts::default())),
        "closed/stale"
    );
    let mut failed = closed();
    failed.state.exit_mut().unwrap().kind = ExitKind::Failed;
    failed.state.exit_mut().unwrap().message = Some("boom".into());
    assert_eq!(
        status_of(&facts(failed, OutputFacts::default())),
        "closed/failed"
    );
    let mut code1 = closed();
    code1.state.exit_mut().unwrap().code = Some(1);
    assert_eq!(
        status_of(&facts(code1, OutputFacts::default())),
        "closed/failed"
    );
    let mut stopped = closed();
    stopped.state.exit_mut().unwrap().kind = ExitKind::Stopped;
    stopped.state.exit_mut().unwrap().code = None;
    stopped.state.exit_mut().unwrap().signal = Some("SIGKILL".into());
    assert_eq!(
        status_of(&facts(stopped, OutputFacts::default())),
        "closed/stopped"
    );
}

#[test]
fn golden_poll_and_wait_texts() {
    // "shows running state and next actions in poll output"
    let mut busy = live();
    busy.state = ThreadState::Live { phase: Phase::Busy };
    let f = facts(busy, OutputFacts::default());
    let text = with(&f, Detail::Summary, |p| polled(p, &p.snapshot()));
    assert_eq!(
            text,
            "Pi thread \"inspect repo\"\nPath: /root/inspect_repo\nID: thread_012345abcdef\nParent: /root\nDepth: 1\nStatus: live/busy pid=123\nRunning: yes\nNext: wait, poll, send follow_up, or stop\nCwd: /tmp/project\nDetail: summary"
        );
    // "shows running state and next actions in wait output"
    let f = facts(live(), OutputFacts::default());
    let text = with(&f, Detail::Summary, |p| waited(p, &p.snapshot(), false, 12));
    assert_eq!(
            text,
            "Wait completed after 12ms for \"inspect repo\".\nPath: /root/inspect_repo\nStatus: live/idle pid=123\nRunning: yes\nNext: send prompt, poll, or stop\nDetail: summary"
        );
    // (Its progress text, `Waiting 12ms for "inspect repo".` …, is the Pi extension's:
    // serve sends the progress details only.)
    let f = facts(closed(), OutputFacts::default());
    let text = with(&f, Detail::Summary, |p| waited(p, &p.snapshot(), true, 12));
    assert_eq!(
            text,
            "Wait timed out after 12ms for \"inspect repo\".\nPath: /root/inspect_repo\nStatus: closed/exited\nRunning: no\nNext: archive, or list\nDetail: summary"
        );
    // "keeps default poll details summarized and makes full output explicit"
    let long = format!("FIRST\n{}\nLAST", "x".repeat(5_000));
    let f = facts(
        closed(),
        OutputFacts {
            last_assistant_text: Some(long),
            ..OutputFacts::default()
        },
    );
    let summary = with(&f, Detail::Summary, |p| polled(p, &p.snapshot()));
    assert!(summary.contains("Result summary"));
    assert!(summary.contains("truncated; use detail=tail or detail=full for more"));
    assert!(!summary.contains("LAST"));
    let tail = with(&f, Detail::Tail, |p| polled(p, &p.snapshot()));
    assert!(tail.contains("Assistant output tail (truncated):"));
    let full = with(&f, Detail::Full, |p| polled(p, &p.snapshot()));
    assert!(full.contains("Last assistant output (full retained):"));
    // "falls back to the last assistant output when a live partial is blank"
    let f = facts(
        live(),
        OutputFacts {
            last_assistant_text: Some("Previous answer".into()),
            last_partial_text: Some(" \n\t ".into()),
            ..OutputFacts::default()
        },
    );
    assert!(with(&f, Detail::Full, |p| polled(p, &p.snapshot())).contains("Previous answer"));
}

/// A poll with everything: parent id, session, result, events of each kind, stderr.
#[test]
fn poll_text_with_events_and_stderr() {
    let mut row = closed();
    row.parent_id = Some("thread_aaaaaaaaaaaa".into());
    row.session_file = Some("/tmp/s.jsonl".into());
    row.session_id = Some("s-1".into());
    let ev = |seq: i64, kind: &str, data: &str| EventRow {
        seq,
        at: format!("2026-01-01T00:00:0{seq}.000Z"),
        kind: kind.to_string().into(),
        data: data.into(),
    };
    let f = ThreadFacts {
        row,
        out: OutputFacts {
            last_assistant_text: Some("Done.\nAll good.".into()),
            stderr_tail: b"warn: x\n".to_vec(),
            ..OutputFacts::default()
        },
        events: vec![
            ev(1, "thread_started", r#"{"pid":9}"#),
            ev(2, "tool_completed", r#"{"toolName":"read","error":true}"#),
            ev(3, "assistant_message", r#"{"text":"Done.\nAll good."}"#),
            ev(
                4,
                "ui_request",
                r#"{"method":"select","title":"Pick","autoCancelled":true}"#,
            ),
            ev(
                5,
                "thread_forked",
                r#"{"pid":9,"sourceSessionFile":"/a.jsonl","sourceEntryId":null}"#,
            ),
            ev(
                6,
                "thread_closed",
                r#"{"exit":{"kind":"exited","code":0,"signal":null}}"#,
            ),
        ],
        usage: Default::default(),
        pending: Default::default(),
        attention: None,
        worktree: None,
    };
    let text = with(&f, Detail::Tail, |p| polled(p, &p.snapshot()));
    assert_eq!(
            text,
            "Pi thread \"inspect repo\"\nPath: /root/inspect_repo\nID: thread_012345abcdef\nParent: /root (thread_aaaaaaaaaaaa)\nDepth: 1\nStatus: closed/exited\nRunning: no\nNext: resume, fork, archive, or list\nCwd: /tmp/project\nDetail: tail\nSession: /tmp/s.jsonl\n\nAssistant output tail:\nDone.\nAll good.\n\nRecent events:\n- 2026-01-01T00:00:01.000Z #1 thread started pid=9\n- 2026-01-01T00:00:02.000Z #2 tool completed: read (error)\n- 2026-01-01T00:00:03.000Z #3 assistant: Done. All good.\n- 2026-01-01T00:00:04.000Z #4 ui select: Pick (auto-cancelled)\n- 2026-01-01T00:00:05.000Z #5 thread forked pid=9 source=/a.jsonl\n- 2026-01-01T00:00:06.000Z #6 thread closed: exited (code 0)\n\nstderr tail:\nwarn: x\n"
        );
}

/// A thread that spent something says so in its poll, wait and list texts (one compact
/// line); one that spent nothing shows no spend; the snapshot (details) never has it.
#[test]
fn poll_wait_and_list_texts_show_what_the_thread_spent() {
    let mut f = facts(closed(), OutputFacts::default());
    let plain = with(&f, Detail::Summary, |p| {
        let s = p.snapshot();
        let mut line = String::new();
        list_line(&mut line, true, &s).unwrap();
        (
            polled(p, &s),
            waited(p, &s, false, 5),
            line,
            serde_json::to_string(&s).unwrap(),
        )
    });
    assert!(!plain.0.contains("Spent") && !plain.1.contains("Spent"));
    assert!(!plain.2.contains("tokens"), "{}", plain.2);
    f.usage = Usage {
        input_tokens: 12_000,
        output_tokens: 300,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        cost_usd: 0.01234,
        turns: 2,
        tool_calls: 1,
    };
    let spent = with(&f, Detail::Summary, |p| {
        let s = p.snapshot();
        let mut line = String::new();
        list_line(&mut line, true, &s).unwrap();
        (
            polled(p, &s),
            waited(p, &s, false, 5),
            line,
            serde_json::to_string(&s).unwrap(),
        )
    });
    // Exactly one line more, after the status.
    assert_eq!(
        spent.0,
        plain.0.replace(
            "Status: closed/exited\n",
            "Status: closed/exited\nSpent: 12.3k tokens, $0.0123\n"
        )
    );
    assert_eq!(
        spent.1,
        plain.1.replace(
            "Status: closed/exited\n",
            "Status: closed/exited\nSpent: 12.3k tokens, $0.0123\n"
        )
    );
    assert_eq!(
            spent.2,
            "inspect repo /root/inspect_repo - closed/exited, 12.3k tokens, $0.0123 [id: thread_012345abcdef]"
        );
    assert_eq!(spent.3, plain.3, "the snapshot is the contract's");
    // Tokens without a cost, and nothing at all.
    let tokens_only = Usage {
        input_tokens: 950,
        ..Usage::default()
    };
    assert_eq!(spend(&tokens_only).as_deref(), Some("950 tokens"));
    assert_eq!(spend(&Usage::default()), None);
}

#[test]
fn action_texts() {
    let f = facts(live(), OutputFacts::default());
    with(&f, Detail::Summary, |p| {
        let s = p.snapshot();
        assert_eq!(
                started(&s, Some(true), None),
                "Started Pi thread \"inspect repo\".\nPath: /root/inspect_repo\nID: thread_012345abcdef\nStatus: live/idle pid=123\nPrompt accepted: yes\nPoll with: { \"action\": \"poll\", \"id\": \"/root/inspect_repo\" }"
            );
        assert_eq!(
                started(&s, None, Some("No answer yet")),
                "Started Pi thread \"inspect repo\".\nPath: /root/inspect_repo\nID: thread_012345abcdef\nStatus: live/idle pid=123\nPrompt accepted: no\nNote: No answer yet\nPoll with: { \"action\": \"poll\", \"id\": \"/root/inspect_repo\" }"
            );
        assert_eq!(
                sent(&s, SendMode::FollowUp, None, Some("Timed out")),
                "Sent message to \"inspect repo\" with mode follow_up.\nPath: /root/inspect_repo\nAccepted: unknown\nStatus: live/idle pid=123\nError: Timed out"
            );
        assert_eq!(
                sent(&s, SendMode::Prompt, Some(true), None),
                "Sent message to \"inspect repo\" with mode prompt.\nPath: /root/inspect_repo\nAccepted: yes\nStatus: live/idle pid=123"
            );
        assert_eq!(
                resumed(&s, false),
                "Resumed Pi thread \"inspect repo\".\nPath: /root/inspect_repo\nID: thread_012345abcdef\nStatus: live/idle pid=123\nNext: send prompt, poll, or stop"
            );
        assert!(resumed(&s, true).starts_with("Thread already live \"inspect repo\"."));
        assert_eq!(
                forked(&s, "/a.jsonl", None),
                "Forked Pi thread \"inspect repo\".\nPath: /root/inspect_repo\nID: thread_012345abcdef\nSource session: /a.jsonl\nSource entry: leaf/root\nStatus: live/idle pid=123\nNext: send prompt, poll, or stop"
            );
    });
    let f = facts(closed(), OutputFacts::default());
    with(&f, Detail::Summary, |p| {
        let s = p.snapshot();
        assert_eq!(
            stopped(&s, false),
            "Stopped \"inspect repo\".\nPath: /root/inspect_repo\nStatus: closed/exited"
        );
        assert_eq!(
            stopped(&s, true),
            "Already closed \"inspect repo\".\nPath: /root/inspect_repo\nStatus: closed/exited"
        );
        assert_eq!(
                archived(&s, true),
                "Archived \"inspect repo\".\nPath: /root/inspect_repo\nStatus: closed/exited\nNext: archive, or list"
            );
        let mut line = String::new();
        list_line(&mut line, true, &s).unwrap();
        list_line(&mut line, false, &s).unwrap();
        assert_eq!(
                line,
                "inspect repo /root/inspect_repo - closed/exited [id: thread_012345abcdef]\ninspect repo /root/inspect_repo - closed/exited [id: thread_012345abcdef]"
            );
    });
    let mut row = closed();
    row.archived = true;
    let f = facts(row, OutputFacts::default());
    with(&f, Detail::Summary, |p| {
        let mut line = String::new();
        list_line(&mut line, true, &p.snapshot()).unwrap();
        assert_eq!(
            line,
            "inspect repo /root/inspect_repo - closed/exited archived [id: thread_012345abcdef]"
        );
    });
    assert_eq!(next_line(&[]), "Next: none");
    assert_eq!(next_line(&["list"]), "Next: list");
    assert_eq!(
        trim_for_display(&"a".repeat(250), 240),
        format!("{}\n[truncated 10 chars]", "a".repeat(240))
    );
}
