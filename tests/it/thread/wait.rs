//! `wait`: after a resume or a fork, a long wait beside a poll, its timeout and progress, and
//! the answer's text at each detail.

use super::{details, message, text, world};
use crate::support::serve_client::{session_user_texts, Serve};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// Issue 13 on the scripted agent (tests/it/real_pi_resume_fork.rs has the same sequences with
/// real Pi): resume and fork send no prompt, so a wait right after them returns idle on its
/// first refresh; a following send and wait brings the reply back.
#[test]
fn wait_after_resume_or_fork_is_idle_at_once() {
    // Each child process plays the script from its start: the replies name their prompts.
    let w = world(json!({"default_reply": "reply to {prompt}"}));
    let mut s = w.serve(&[]);
    let r = s.thread(json!({"action": "start", "prompt": "go", "taskName": "a"}));
    let file = details(&r)["snapshot"]["session"]["file"]
        .as_str()
        .unwrap()
        .to_string();
    let r = s.thread(json!({"action": "wait", "id": "a", "timeoutMs": 20000}));
    assert_eq!(details(&r)["snapshot"]["resultSummary"], "reply to go");
    let send_wait = |s: &mut Serve, id: &str, message: &str| {
        let r = s.thread(json!({"action": "send", "id": id, "message": message}));
        assert_eq!(details(&r)["mode"], "prompt", "{r}");
        let r = s.thread(json!({"action": "wait", "id": id, "timeoutMs": 20000}));
        let reply = format!("reply to {message}");
        assert_eq!(details(&r)["snapshot"]["resultSummary"], reply, "{r}");
    };

    // start -> wait -> stop -> resume -> wait: nothing is prompted by the resume or the wait.
    s.thread(json!({"action": "stop", "id": "a"}));
    s.thread(json!({"action": "resume", "id": "a"}));
    s.wait_idle_at_once("a", 20000);
    assert_eq!(session_user_texts(Path::new(&file)), ["go"]);
    send_wait(&mut s, "a", "more");

    // fork of a child, fork of the parent session.
    s.thread(json!({"action": "fork", "id": "a", "taskName": "b"}));
    s.wait_idle_at_once("b", 20000);
    send_wait(&mut s, "b", "in the fork");
    s.thread(json!({"action": "fork", "taskName": "p"}));
    s.wait_idle_at_once("p", 20000);

    // SIGKILL of serve -> a new serve -> resume of the stale thread -> wait.
    s.thread(json!({"action": "stop", "id": "b"}));
    s.thread(json!({"action": "stop", "id": "p"}));
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    drop(s);
    let mut s = w.serve(&[]);
    let r = s.thread(json!({"action": "poll", "id": "a"}));
    assert_eq!(details(&r)["snapshot"]["exit"]["kind"], "stale", "{r}");
    s.thread(json!({"action": "resume", "id": "a"}));
    s.wait_idle_at_once("a", 20000);
    assert_eq!(session_user_texts(Path::new(&file)), ["go", "more"]);
    send_wait(&mut s, "a", "after the crash");
    assert_eq!(
        session_user_texts(Path::new(&file)),
        ["go", "more", "after the crash"]
    );
    w.close_all(s);
}

#[test]
fn a_long_wait_does_not_block_a_poll_and_times_out_without_stopping() {
    let w = world(json!({"turns": [{"steps": [{"delay_ms": 4000}, {"text": "slow"}]}]}));
    let mut s = w.serve(&[]);
    let r = s.thread(json!({"action": "start", "prompt": "slow work", "taskName": "slow"}));
    assert_eq!(details(&r)["kind"], "started");
    let wait = s.send(
        "thread",
        json!({"action": "wait", "id": "slow", "timeoutMs": 1500, "detail": "tail"}),
    );
    let started = std::time::Instant::now();
    let poll = s.send("thread", json!({"action": "poll", "id": "slow"}));
    let p = s.response(poll, Duration::from_secs(10));
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "poll answered while the wait runs"
    );
    assert_eq!(p["result"]["details"]["snapshot"]["phase"], "busy");
    let r = s.response(wait, Duration::from_secs(10));
    assert_eq!(r["result"]["details"]["timedOut"], true);
    // Progress is projected at the wait's detail, as its answer is.
    let progress = s.progress_of(wait);
    assert!(!progress.is_empty());
    for p in &progress {
        assert_eq!(p["detail"], "tail", "{p}");
        assert_eq!(p["snapshot"]["detail"], "tail", "{p}");
        assert_eq!(p["running"], true, "{p}");
        assert!(p.get("timeoutMs").is_none(), "{p}");
    }
    assert_eq!(
        r["result"]["details"]["snapshot"]["status"], "live",
        "waiting never stops the child"
    );
    let r = s.thread(json!({"action": "wait", "id": "slow", "timeoutMs": 0}));
    assert_eq!(details(&r)["timedOut"], true);
    let e = s.thread_error(json!({"action": "wait", "id": "slow", "timeoutMs": 700000}));
    assert!(message(&e).contains("timeoutMs must be an integer from 0 to 600000 milliseconds"));
    w.close_all(s);
}

/// What the model reads: pi-threads' multi-line blocks. At `summary` the answer keeps its
/// line breaks (threadbase's one improvement), a cut one is labelled as pi-threads labels it;
/// `details` stay exactly the contract's (compacted, cut) text.
#[test]
fn content_keeps_the_answers_line_breaks_and_says_when_it_is_cut() {
    let short = "Findings:\n1. The schema is stale.\n2. Two examples fail.";
    let long: String = (1..=60)
        .map(|i| format!("{i:02}. {}\n", "word ".repeat(15).trim_end()))
        .collect();
    let long = format!("Report:\n{long}Done.");
    let w = world(json!({"turns": [
        {"steps": [{"text": short}]},
    ], "default_reply": long}));
    let mut s = w.serve(&[]);
    s.thread(json!({"action": "start", "prompt": "short answer", "taskName": "short"}));
    let r = s.thread(json!({"action": "wait", "id": "short", "timeoutMs": 20000}));
    let snap = &details(&r)["snapshot"];
    let waited = details(&r)["waitedMs"].as_u64().unwrap();
    assert_eq!(
        text(&r),
        format!(
            "Wait completed after {waited}ms for \"short answer\".\nPath: /root/short\nStatus: live/idle pid={}\nSpent: 34 tokens\nRunning: yes\nNext: send prompt, poll, or stop\nDetail: summary\n\nResult summary ({} chars):\n{short}",
            snap["pid"],
            short.len()
        )
    );
    assert_eq!(
        snap["result"]["text"],
        "Findings: 1. The schema is stale. 2. Two examples fail."
    );
    assert_eq!(snap["resultSummary"], snap["result"]["text"]);

    s.thread(json!({"action": "send", "id": "short", "message": "now the long one"}));
    let r = s.thread(json!({"action": "wait", "id": "short", "timeoutMs": 20000}));
    let total = long.encode_utf16().count();
    let t = text(&r);
    let label = format!(
        "\n\nResult summary ({total} chars, truncated; use detail=tail or detail=full for more):\n"
    );
    let (_, answer) = t.split_once(&label).unwrap_or_else(|| panic!("{t}"));
    assert!(answer.starts_with("Report:\n01. word"), "{t}");
    assert!(answer.lines().count() > 5, "line breaks kept: {t}");
    assert_eq!(answer, threadbase::text::truncate_ellipsis(&long, 700));
    // details: the contract's compacted summary, unchanged, and marked truncated.
    let snap = &details(&r)["snapshot"];
    let compacted = threadbase::text::compact_cut(&long, 700);
    assert_eq!(snap["result"]["text"], compacted.as_str());
    assert_eq!(snap["result"]["charCount"], total);
    assert_eq!(snap["result"]["truncated"], true);
    assert!(!compacted.contains('\n'));

    // tail: the output tail; full: the whole retained text.
    let r = s.thread(json!({"action": "poll", "id": "short", "detail": "tail"}));
    assert!(
        text(&r).contains("\nDetail: tail\nSession: "),
        "{}",
        text(&r)
    );
    assert!(
        text(&r).contains(&format!(
            "\n\nAssistant output tail (truncated):\n[truncated first {} chars]\n{}\n\nRecent events:\n- ",
            total - 4_000,
            &long[long.len() - 4_000..]
        )),
        "{}",
        text(&r)
    );
    let r = s.thread(json!({"action": "poll", "id": "short", "detail": "full"}));
    assert!(
        text(&r).contains(&format!(
            "\n\nLast assistant output (full retained):\n{long}\n\nRecent events:\n- "
        )),
        "{}",
        text(&r)
    );
    assert_eq!(
        details(&r)["snapshot"]["lastAssistantText"],
        long.as_str(),
        "full detail carries the retained text"
    );
    w.close_all(s);
}
