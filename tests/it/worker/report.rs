//! `threads_report`: who may report, and one report however many processes send it.

use super::{
    error, message, spawn_params, tool, wait_until, wait_view, world, COORD, QUICK, REVIEW_WORKER,
};
use crate::support::serve_client::top_status;
use serde_json::json;
use std::time::Duration;

#[test]
fn roles_and_report_dedupe_across_processes() {
    let w = world(QUICK);
    let mut s = w.serve(COORD, &[]);
    tool(
        &mut s,
        "threads_spawn",
        json!({"key": "review", "title": "Review", "directory": w.work(), "task": "Review it"}),
    );
    wait_view(&mut s, REVIEW_WORKER, |v| v["outcome"] == "succeeded");

    // Native children and managed workers cannot spawn; a coordinator cannot report.
    let mut native = w.serve(
        "ses_native",
        &[("PI_THREADS_SELF_ID", "thread_aaaaaaaaaaaa")],
    );
    let e = error(&mut native, "threads_spawn", spawn_params(&w, "x", "x"));
    assert_eq!(e["code"], "forbidden");
    assert!(message(&e)
        .starts_with("Native subagents and managed workers cannot spawn managed workers"));
    native.close(Duration::from_secs(20));
    let mut w1 = w.serve(REVIEW_WORKER, &[]);
    let e = error(&mut w1, "threads_spawn", spawn_params(&w, "x", "x"));
    assert!(message(&e)
        .starts_with("Native subagents and managed workers cannot spawn managed workers"));
    let e = error(
        &mut s,
        "threads_report",
        json!({"verdict": "PASS", "summary": "s", "evidence": []}),
    );
    assert_eq!(e["code"], "forbidden");
    assert!(message(&e).starts_with("Only a managed worker can call threads_report"));
    let e = error(
        &mut w1,
        "threads_report",
        json!({"verdict": "GOOD", "summary": "s", "evidence": []}),
    );
    assert_eq!(e["code"], "invalid_params");

    // The same report from two worker serves at once: one row, one notice, equal answers.
    let mut w2 = w.serve(REVIEW_WORKER, &[]);
    let report = json!({"verdict": "PASS WITH NOTES", "summary": "Looks good", "evidence": ["cargo test: ok", "ünïcode / \"q\""]});
    let a = w1.send("threads_report", report.clone());
    let b = w2.send("threads_report", report.clone());
    let ra = w1.response(a, Duration::from_secs(30));
    let rb = w2.response(b, Duration::from_secs(30));
    assert_eq!(ra["result"], rb["result"]);
    assert_eq!(
        ra["result"]["details"],
        json!({"workerID": REVIEW_WORKER, "report": report})
    );
    assert_eq!(w.count("SELECT count(*) FROM reports"), 1);
    assert_eq!(
        w.count("SELECT count(*) FROM mailbox WHERE direction = 'to_parent' AND kind = 'report'"),
        1
    );
    let (body, message_id, report_id): (String, String, String) = w
        .conn()
        .query_row(
            "SELECT mb.body, mb.message_id, t.report_message_id FROM mailbox mb JOIN threads t ON t.id = mb.thread_id WHERE mb.kind = 'report'",
            (),
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(message_id, report_id);
    assert_eq!(
        body,
        format!(
            "Managed worker {REVIEW_WORKER} (review) report:\n{}",
            serde_json::to_string(&report).unwrap()
        )
    );
    // Identical again: the original; different: refused.
    let again = tool(&mut w2, "threads_report", report.clone());
    assert_eq!(again["report"], report);
    let e = error(
        &mut w1,
        "threads_report",
        json!({"verdict": "FAIL", "summary": "Looks bad", "evidence": []}),
    );
    assert_eq!(e["code"], "conflict");
    assert!(message(&e).starts_with(
        "This worker already has a different report. Start a new task with a new spawn key."
    ));
    w1.close(Duration::from_secs(20));
    w2.close(Duration::from_secs(20));

    // The coordinator's view and list status; the notice reaches the coordinator's serve once.
    let v = wait_view(&mut s, REVIEW_WORKER, |v| !v["report"].is_null());
    assert_eq!(v["report"], report);
    assert_eq!(v["hidden"], true, "PASS WITH NOTES hides by default");
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(
        top_status(&w.base.db, &list, REVIEW_WORKER),
        "PASS WITH NOTES"
    );
    wait_until("the report notice", Duration::from_secs(10), || {
        s.notifications()
            .iter()
            .any(|n| n["method"] == "notice" && n["params"]["kind"] == "report")
    });
    let notices = s.notices();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0]["params"]["threadId"], REVIEW_WORKER);
    assert_eq!(notices[0]["params"]["messageId"], report_id.as_str());
    assert_eq!(notices[0]["params"]["text"], body.as_str());
    // A send to a reported worker shows it explicitly.
    tool(
        &mut s,
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "more", "text": "One more thing"}),
    );
    let v = wait_view(&mut s, REVIEW_WORKER, |_| true);
    assert_eq!(v["hidden"], false);
    let hidden: Option<i64> = w
        .conn()
        .query_row(
            "SELECT hidden FROM threads WHERE id = ?1",
            [REVIEW_WORKER],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(hidden, Some(0));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}
