//! Contract A's tests that cross every action, so belong to no one verb: one session through
//! every action and the main error paths, and pi-threads' golden cases of the tool's contract
//! (`test/tool-contract.test.ts`: a list's aggregate, a send the child refuses and a wait's
//! progress in one test; the errors the tool throws).

use super::{
    details, message, pick, poll_until, status_phase_exit, text, with_serve, world, SCRIPT, SINGLE,
};
use crate::support::common::{self, keys};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

#[test]
fn every_action_through_serve() {
    let (w, mut s) = with_serve(SCRIPT);

    // start: generated names, explicit task name, duplicate path.
    let r = s.thread(json!({"action": "start", "prompt": "Say hi\nthen more"}));
    let d = details(&r);
    assert_eq!(d["kind"], "started");
    assert_eq!(d["promptAccepted"], true);
    assert_eq!(d["snapshot"]["path"], "/root/say_hi_then_more");
    assert_eq!(d["snapshot"]["name"], "Say hi");
    assert_eq!(d["snapshot"], d["thread"]);
    assert_eq!(d["detail"], "summary");
    assert_eq!(d["running"], true);
    let hi = d["snapshot"]["id"].as_str().unwrap().to_string();
    assert!(threadbase::paths::is_thread_id(&hi));
    let r = s.thread(json!({"action": "start", "prompt": "Review the docs", "taskName": "review_docs", "name": "Docs"}));
    assert_eq!(details(&r)["snapshot"]["path"], "/root/review_docs");
    let e =
        s.thread_error(json!({"action": "start", "prompt": "again", "taskName": "review_docs"}));
    assert_eq!(e["code"], "conflict");
    assert!(
        message(&e).starts_with("Thread path already exists: /root/review_docs (id: thread_"),
        "{e}"
    );
    let r = s.thread(json!({"action": "start", "prompt": "Say hi\nthen more"}));
    assert_eq!(
        details(&r)["snapshot"]["path"],
        "/root/say_hi_then_more_2",
        "unique suffix"
    );
    let third = details(&r)["snapshot"]["id"].as_str().unwrap().to_string();

    // wait: progress notifications, then idle with the answer.
    let id = s.send(
        "thread",
        json!({"action": "wait", "id": "say_hi_then_more", "timeoutMs": 20000}),
    );
    let r = s.response(id, Duration::from_secs(30));
    let d = &r["result"]["details"];
    assert_eq!(d["kind"], "waited");
    assert_eq!(d["timedOut"], false);
    assert_eq!(d["snapshot"]["phase"], "idle");
    assert_eq!(d["snapshot"]["resultSummary"], "answer to Say hi then more");
    // The wait's get_state told the session's name (the child's --name) and pending count.
    let session = &d["snapshot"]["session"];
    assert_eq!(session["kind"], "known", "{session}");
    assert_eq!(session["name"], "Say hi", "{session}");
    assert_eq!(session["pendingMessageCount"], 0, "{session}");
    assert!(session["file"].as_str().unwrap().ends_with(".jsonl"));
    assert!(session["id"].is_string());
    let progress = s.progress_of(id);
    assert!(!progress.is_empty());
    // Each progress carries what every single-thread result does, and no timeoutMs.
    for p in &progress {
        assert_eq!(keys(p), [&SINGLE[..], &["waitedMs"]].concat(), "{p}");
        assert_eq!(p["kind"], "waiting");
        assert_eq!(p["snapshot"], p["thread"]);
        assert_eq!(p["running"], p["snapshot"]["running"]);
        assert_eq!(p["detail"], "summary");
        assert_eq!(
            p["nextSuggestedActions"],
            p["snapshot"]["nextSuggestedActions"]
        );
    }

    // poll at each detail.
    let r = s.thread(json!({"action": "poll", "id": hi, "detail": "tail"}));
    assert_eq!(details(&r)["kind"], "polled");
    assert_eq!(
        details(&r)["snapshot"]["outputTail"],
        "answer to Say hi\nthen more"
    );
    let r = s.thread(json!({"action": "poll", "id": "/root/say_hi_then_more", "detail": "full"}));
    assert_eq!(
        details(&r)["snapshot"]["lastAssistantText"],
        "answer to Say hi\nthen more"
    );
    assert!(text(&r).contains("/root/say_hi_then_more"));

    // list and filters.
    let r = s.thread(json!({"action": "list"}));
    assert_eq!(details(&r)["kind"], "listed");
    assert_eq!(details(&r)["count"], 3);
    assert_eq!(details(&r)["threads"], details(&r)["snapshots"]);
    let r = s.thread(json!({"action": "list", "parent": "."}));
    assert_eq!(details(&r)["count"], 3);
    let r = s.thread(json!({"action": "list", "ancestor": "/root/review_docs"}));
    assert_eq!(details(&r)["count"], 0, "a valid path is a valid filter");

    // send: idle → prompt by default.
    let r = s.thread(json!({"action": "send", "id": hi, "message": "and more"}));
    assert_eq!(
        (
            details(&r)["kind"].as_str(),
            details(&r)["mode"].as_str(),
            details(&r)["accepted"].as_bool()
        ),
        (Some("sent"), Some("prompt"), Some(true))
    );
    let r = s.thread(json!({"action": "wait", "id": hi}));
    assert_eq!(details(&r)["snapshot"]["resultSummary"], "done: and more");

    // stop, stop again, send to closed.
    let r = s.thread(json!({"action": "stop", "id": hi}));
    let snap = &details(&r)["snapshot"];
    assert_eq!(
        status_phase_exit(snap),
        (Some("closed"), Some("idle"), Some("stopped"))
    );
    assert_eq!(snap["resumable"], true);
    assert_eq!(
        snap["nextSuggestedActions"],
        json!(["resume", "fork", "archive", "list"])
    );
    // `alreadyClosed` is always there: false on the stop that closed the thread.
    assert_eq!(details(&r)["alreadyClosed"], false, "{r}");
    let r = s.thread(json!({"action": "stop", "id": hi}));
    assert_eq!(details(&r)["alreadyClosed"], true);
    let e = s.thread_error(json!({"action": "send", "id": "say_hi_then_more", "message": "x"}));
    assert_eq!(e["code"], "closed");
    assert!(message(&e).starts_with("Thread is closed: say_hi_then_more"));

    // archive / unarchive; live threads refuse.
    let r = s.thread(json!({"action": "archive", "id": hi}));
    assert_eq!(
        (
            details(&r)["kind"].as_str(),
            details(&r)["archived"].as_bool()
        ),
        (Some("archived"), Some(true))
    );
    assert_eq!(details(&s.thread(json!({"action": "list"})))["count"], 2);
    assert_eq!(
        details(&s.thread(json!({"action": "list", "visibility": "archived"})))["count"],
        1
    );
    let e = s.thread_error(json!({"action": "archive", "id": "review_docs"}));
    assert!(message(&e).starts_with("Cannot archive live thread /root/review_docs. Repair:"));

    // resume: same id and path, unarchived, no prompt; a second resume is alreadyLive.
    let r = s.thread(json!({"action": "resume", "id": hi}));
    let d = details(&r);
    assert_eq!(
        (d["kind"].as_str(), d["alreadyLive"].as_bool()),
        (Some("resumed"), Some(false))
    );
    assert_eq!(
        (
            d["snapshot"]["id"].as_str(),
            d["snapshot"]["archived"].as_bool()
        ),
        (Some(hi.as_str()), Some(false))
    );
    assert_eq!(d["snapshot"]["phase"], "idle");
    let r = s.thread(json!({"action": "resume", "id": hi}));
    assert_eq!(details(&r)["alreadyLive"], true);
    let polled = s.thread(json!({"action": "poll", "id": hi, "detail": "full"}));
    let evs = &details(&polled)["snapshot"]["recentEvents"];
    assert!(evs
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["type"] == "thread_resumed"));

    // fork a child at its leaf, and the parent session.
    let r = s.thread(json!({"action": "fork", "id": hi}));
    let d = details(&r);
    assert_eq!(d["kind"], "forked");
    assert_eq!(d["snapshot"]["path"], "/root/fork_of_say_hi");
    assert_eq!(d["snapshot"]["name"], "Fork of Say hi");
    assert!(Path::new(d["sourceSessionFile"].as_str().unwrap()).exists());
    assert_eq!(d["snapshot"]["phase"], "idle", "no kickoff prompt");
    let r = s.thread(json!({"action": "fork"}));
    let d = details(&r);
    assert_eq!(d["snapshot"]["path"], "/root/fork_of_current_session");
    assert_eq!(d["sourceEntryId"], "a0000002");
    assert_eq!(
        d["sourceSessionFile"],
        w.parent_session.display().to_string()
    );
    let e = s.thread_error(json!({"action": "fork", "entryId": "a0000002", "position": "before"}));
    assert!(
        message(&e).starts_with("Cannot fork before entry a0000002"),
        "{e}"
    );
    let r = s.thread(
        json!({"action": "fork", "entryId": "a0000001", "position": "before", "taskName": "fresh"}),
    );
    assert_eq!(details(&r)["snapshot"]["path"], "/root/fresh");

    // errors: unknown and ambiguous references, bad params, unknown method, bad JSON.
    let e = s.thread_error(json!({"action": "poll", "id": "nobody"}));
    assert_eq!(e["code"], "unknown_reference");
    let e = s.thread_error(json!({"action": "send", "id": third}));
    assert_eq!(e["code"], "invalid_params");
    let id = s.send("agent_teleport", json!({}));
    assert_eq!(
        s.response(id, Duration::from_secs(5))["error"]["code"],
        "invalid_params"
    );
    s.raw("{not json");
    std::thread::sleep(Duration::from_millis(200));
    let _ = s.thread(json!({"action": "list"}));

    // stdin EOF: every live child is stopped and recorded; serve exits 0.
    let status = s.close(Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    let count = |sql: &str| common::count(&w.base.db, sql);
    assert_eq!(
        count("SELECT count(*) FROM threads WHERE status = 'live'"),
        0
    );
    let stopped = count("SELECT count(*) FROM threads WHERE exit_kind = 'stopped'");
    assert!(stopped >= 5, "{stopped}");
    assert!(
        w.base.leftovers().is_empty(),
        "no child process is left: {:?}",
        w.base.leftovers()
    );
}

#[test]
fn error_paths_through_serve() {
    let w = world(serde_json::from_str(SCRIPT).unwrap());
    std::fs::write(w.base.root.join("a_file"), "x").unwrap();
    let args = vec![
        "--session-file".into(),
        w.parent_session.display().to_string(),
        "--parent-args".into(),
        r#"["--models","anthropic/*"]"#.into(),
    ];
    let mut s = w.base.serve("script", args, &[]);
    // cwd: a file, a missing folder.
    let e = s.thread_error(json!({"action": "start", "prompt": "x", "cwd": "a_file"}));
    assert!(
        message(&e).starts_with("Invalid child cwd:") && message(&e).contains("is not a directory"),
        "{e}"
    );
    let e = s.thread_error(json!({"action": "start", "prompt": "x", "cwd": "nowhere"}));
    assert!(message(&e).starts_with("Invalid child cwd:"), "{e}");
    // args: inline values, unknown flags, and the inherited --models scope.
    let e = s.thread_error(json!({"action": "start", "prompt": "x", "args": ["--model=foo"]}));
    assert!(
        message(&e).starts_with("Unsupported child Pi arg for pi-threads: --model=foo. Repair:"),
        "{e}"
    );
    let e = s.thread_error(json!({"action": "start", "prompt": "x", "args": ["--tools", "bash"]}));
    assert!(
        message(&e).starts_with("Unsupported child Pi arg for pi-threads: --tools"),
        "{e}"
    );
    let e = s
        .thread_error(json!({"action": "start", "prompt": "x", "args": ["--model", "openai/gpt"]}));
    assert!(
        message(&e).contains(
            "child model/provider/thinking args cannot override an inherited --models scope"
        ),
        "{e}"
    );
    // Nothing was reserved by the rejected starts.
    assert_eq!(details(&s.thread(json!({"action": "list"})))["count"], 0);

    // Ambiguous task names across branches; relative and root/ forms disambiguate.
    s.thread(json!({"action": "start", "prompt": "a", "taskName": "alpha"}));
    s.thread(json!({"action": "start", "prompt": "b", "taskName": "beta"}));
    let r = s.thread(json!({"action": "fork", "id": "alpha", "taskName": "review"}));
    assert_eq!(details(&r)["snapshot"]["path"], "/root/review");
    let e = s.thread_error(json!({"action": "poll", "id": "thread_ffffffffffff"}));
    assert_eq!(e["code"], "unknown_reference");
    assert!(
        message(&e).contains("Known threads: /root/alpha (id: thread_"),
        "{e}"
    );

    // Two concurrent resumes start one process.
    s.thread(json!({"action": "stop", "id": "alpha"}));
    let a = s.send("thread", json!({"action": "resume", "id": "alpha"}));
    let b = s.send("thread", json!({"action": "resume", "id": "alpha"}));
    let ra = s.response(a, Duration::from_secs(20));
    let rb = s.response(b, Duration::from_secs(20));
    let live: Vec<bool> = [&ra, &rb]
        .iter()
        .map(|r| r["result"]["details"]["alreadyLive"].as_bool().unwrap())
        .collect();
    assert_eq!(live.iter().filter(|l| **l).count(), 1, "{ra} {rb}");

    // A vanished session file is not resumable; neither is a thread with no file.
    let r = s.thread(json!({"action": "stop", "id": "beta"}));
    let file = details(&r)["snapshot"]["session"]["file"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::remove_file(&file).unwrap();
    let e = s.thread_error(json!({"action": "resume", "id": "beta"}));
    assert_eq!(e["code"], "not_resumable");
    assert!(
        message(&e).starts_with(&format!(
            "Cannot resume managed thread: saved Pi session file does not exist: {file}"
        )),
        "{e}"
    );
    let e = s.thread_error(json!({"action": "fork", "id": "beta"}));
    assert!(
        message(&e).starts_with("Cannot fork /root/beta: no saved Pi session file is known"),
        "{e}"
    );
    let e = s.thread_error(json!({"action": "fork", "id": "alpha", "entryId": "nope"}));
    assert!(
        message(&e).starts_with("Cannot fork: entry not found: nope"),
        "{e}"
    );
    s.close(Duration::from_secs(20));

    // A parent without a session file cannot fork itself.
    let args = vec!["--session-id".into(), "ses_no_file".into()];
    let mut s = w.base.serve("script", args, &[]);
    let e = s.thread_error(json!({"action": "fork"}));
    assert!(
        message(&e).starts_with(
            "Cannot fork the current parent session because it has no saved Pi session file"
        ),
        "{e}"
    );
    w.close_all(s);
}

/// test/tool-contract.test.ts, "keeps tool details stable for aggregate, progress, and
/// recoverable send errors": a live busy thread and a closed one; the list's aggregate
/// details, a send the child refuses (a result with `accepted: false` and the child's
/// `error`, not a thrown error), a wait that times out and its progress details. Every
/// single-thread result carries the same snapshot as `snapshot` and `thread`.
///
/// The original's stub manager answers a send of mode `prompt` with a made-up refusal and
/// reports progress even for `timeoutMs: 0`; here the refusal is Pi's own answer to a
/// `prompt` while the child streams (reference/pi-rpc.md), and the progress comes from a
/// wait with a positive timeout (a `timeoutMs: 0` wait returns at once without a refresh
/// and so without progress, as the original's real manager does).
#[test]
fn golden_aggregate_progress_and_recoverable_send_errors() {
    // The closed thread: answers, then its process exits by itself (code 0).
    let w = world(json!({"turns": [[{"text": "Completed final answer."}, {"exit": 0}]]}));
    let mut s = w.serve(&[]);
    s.thread(json!({"action": "start", "prompt": "Finish the work", "taskName": "finished_child"}));
    let closed = poll_until(&mut s, "finished_child", "the child exits", |snap| {
        snap["status"] == "closed"
    });
    assert_eq!(
        pick(&closed, &["exit", "resultSummary"]),
        json!({"exit": {"kind": "exited", "code": 0, "signal": null},
               "resultSummary": "Completed final answer."})
    );

    // The live thread: busy, in the middle of streaming its answer (the scripted agent reads
    // its script when it starts, so the new script is this child's only).
    std::fs::write(
        w.base.root.join("script.json"),
        json!({"turns": [[{"text": "Partial answer\nwith extra spacing", "deltas": 1,
                           "delta_delay_ms": 60000}]]})
        .to_string(),
    )
    .unwrap();
    let r = s.thread(json!({"action": "start", "prompt": "Contract work",
                            "taskName": "contract_child", "name": "contract child"}));
    assert_eq!(details(&r)["promptAccepted"], true, "{r}");
    // A poll refreshes the child's state, so its session name and pending count are known.
    let live = poll_until(&mut s, "contract_child", "the partial answer", |snap| {
        snap["result"]["status"] == "partial"
    });
    let pid = live["pid"].as_i64().unwrap();
    let next = json!(["wait", "poll", "send follow_up", "stop"]);
    assert_eq!(
        pick(
            &live,
            &[
                "status",
                "phase",
                "running",
                "resumable",
                "stale",
                "result",
                "resultSummary",
                "nextSuggestedActions"
            ]
        ),
        json!({"status": "live", "phase": "busy", "running": true, "resumable": false,
               "stale": false,
               "result": {"status": "partial", "source": "assistant_partial",
                          "text": "Partial answer with extra spacing", "charCount": 33,
                          "truncated": false},
               "resultSummary": "Partial answer with extra spacing",
               "nextSuggestedActions": next})
    );
    assert_eq!(
        pick(&live["session"], &["kind", "name", "pendingMessageCount"]),
        json!({"kind": "known", "name": "contract child", "pendingMessageCount": 0})
    );

    // list: the aggregate details; `threads` and `snapshots` are the same list, in path order.
    let list = s.thread(json!({"action": "list"}));
    let d = details(&list);
    let aggregate = [
        "kind",
        "threads",
        "snapshots",
        "count",
        "liveCount",
        "closedCount",
        "detail",
    ];
    assert_eq!(keys(d), aggregate);
    assert_eq!(
        pick(d, &aggregate),
        json!({"kind": "listed", "threads": [live, closed], "snapshots": [live, closed],
               "count": 2, "liveCount": 1, "closedCount": 1, "detail": "summary"})
    );
    assert_eq!(
        text(&list),
        format!(
            "contract child /root/contract_child - live/busy pid={pid} [id: {}]\nFinish the work /root/finished_child - closed/exited, 26 tokens [id: {}]",
            live["id"].as_str().unwrap(),
            closed["id"].as_str().unwrap()
        )
    );

    let with = |own: &[&'static str]| -> Vec<&'static str> { [&SINGLE[..], own].concat() };

    // send: the child refuses a `prompt` while it streams. A recoverable error is a result.
    let sent = s.thread(
        json!({"action": "send", "id": "/root/contract_child", "message": "Next",
                               "mode": "prompt"}),
    );
    let refusal = "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message.";
    let own = with(&["mode", "accepted", "error"]);
    assert_eq!(keys(details(&sent)), own);
    assert_eq!(
        pick(details(&sent), &own),
        json!({"kind": "sent", "snapshot": live, "thread": live, "running": true,
               "detail": "summary", "nextSuggestedActions": next, "mode": "prompt",
               "accepted": false, "error": refusal})
    );
    assert_eq!(
        text(&sent),
        format!("Sent message to \"contract child\" with mode prompt.\nPath: /root/contract_child\nAccepted: no\nStatus: live/busy pid={pid}\nError: {refusal}")
    );

    // wait: times out (the child is still streaming), with progress on the way.
    let req = s.send(
        "thread",
        json!({"action": "wait", "id": "/root/contract_child", "timeoutMs": 600}),
    );
    let waited = s.response(req, Duration::from_secs(20))["result"].clone();
    let waited_ms = details(&waited)["waitedMs"].as_u64().unwrap();
    assert!(waited_ms >= 600, "{waited}");
    let own = with(&["timedOut", "waitedMs"]);
    assert_eq!(keys(details(&waited)), own);
    assert_eq!(
        pick(details(&waited), &own),
        json!({"kind": "waited", "snapshot": live, "thread": live, "running": true,
               "detail": "summary", "nextSuggestedActions": next, "timedOut": true,
               "waitedMs": waited_ms})
    );
    // The summary keeps the partial answer's line break in `content` (a deliberate difference:
    // pi-threads prints the compacted text); `details` keep the compacted one (above).
    assert_eq!(
        text(&waited),
        format!("Wait timed out after {waited_ms}ms for \"contract child\".\nPath: /root/contract_child\nStatus: live/busy pid={pid}\nRunning: yes\nNext: wait, poll, send follow_up, or stop\nDetail: summary\n\nCurrent assistant summary (33 chars):\nPartial answer\nwith extra spacing")
    );
    let progress = s.progress_of(req);
    assert!(!progress.is_empty(), "a wait reports progress");
    let own = with(&["waitedMs"]);
    for p in &progress {
        assert_eq!(keys(p), own);
        let ms = p["waitedMs"].as_u64().unwrap();
        assert!(ms <= waited_ms, "{p}");
        assert_eq!(
            pick(p, &own),
            json!({"kind": "waiting", "snapshot": live, "thread": live, "running": true,
                   "detail": "summary", "nextSuggestedActions": next, "waitedMs": ms})
        );
    }

    // The original's own request: `timeoutMs: 0` times out at once, with no refresh and so
    // no progress.
    let req = s.send(
        "thread",
        json!({"action": "wait", "id": "/root/contract_child", "timeoutMs": 0}),
    );
    let r = s.response(req, Duration::from_secs(20));
    assert_eq!(
        pick(&r["result"]["details"], &["timedOut", "snapshot"]),
        json!({"timedOut": true, "snapshot": live}),
        "{r}"
    );
    assert!(
        !s.notifications()
            .iter()
            .any(|n| n["method"] == "progress" && n["params"]["requestId"] == req),
        "no progress for a zero timeout"
    );

    // A list that matches nothing says so, as the empty one does.
    let r = s.thread(json!({"action": "list", "state": "live", "visibility": "archived"}));
    assert_eq!(text(&r), threadbase::contract::format::NO_THREADS);
    assert_eq!(
        pick(details(&r), &["count", "liveCount", "closedCount"]),
        json!({"count": 0, "liveCount": 0, "closedCount": 0})
    );
    w.close_all(s);
}

/// test/tool-contract.test.ts, "keeps tool-thrown errors stable": invalid parameters and an
/// unknown reference are thrown (serve answers them as errors, `{code, message}`, with no
/// result and so no details), with these texts. The original's stub manager threw a shortened
/// unknown-reference text; the real manager's text (reference/contract-semantics.md §1.4) is
/// asserted here. Its third case, a call whose abort signal fired before it ran (`Thread action
/// aborted`), is decided in the Pi extension before serve is asked, so it is pinned there
/// (`real_pi_extension::real_pi_extension_abort_texts_are_the_originals`).
#[test]
fn golden_tool_thrown_errors() {
    let (w, mut s) = with_serve(SCRIPT);
    let e = s.thread_error(json!({"action": "send", "id": "missing"}));
    assert_eq!(
        e,
        json!({"code": "invalid_params", "message": r#"Invalid thread parameters for send: missing required field message. Repair: use the send shape { "action": "send", "id": "/root/inspect_tests", "message": "Continue", "mode": "follow_up" }."#})
    );
    let e = s.thread_error(json!({"action": "poll", "id": "missing"}));
    assert_eq!(
        e,
        json!({"code": "unknown_reference", "message": r#"Unknown thread reference: "missing". Accepted reference forms: thread id (thread_012345abcdef), canonical path (/root/task), relative path from the current thread (task or parent/task), or unambiguous taskName. No threads are currently managed by this parent. Repair: use a known path/id, run { "action": "list" }, or start the thread first."#})
    );
    w.close_all(s);
}
