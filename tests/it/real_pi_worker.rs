//! A real Pi worker (contract C) against the fake LLM: the coordinator (this test, through
//! `threadbase serve`) spawns a worker whose Pi loads the threadbase extension with the worker
//! tools; the scripted model calls `threads_report`; the worker's own `serve` stores the report
//! and the coordinator's `serve` delivers it as a notice exactly once. Skips without Pi unless
//! CI=true.

use crate::support::fake_llm;
use crate::support::serve_client;

use std::time::{Duration, Instant};

use fake_llm::{hermetic_pi_env, pi_or_skip, FakeLlm, Step};
use serde_json::{json, Value};
use serve_client::serve_with_pi_children;

#[test]
fn a_real_pi_worker_reports_once_to_its_coordinator() {
    let Some(pi) = pi_or_skip("a_real_pi_worker_reports_once_to_its_coordinator") else {
        return;
    };
    let fake = FakeLlm::with_script([
        Step::tool_call(
            "threads_report",
            json!({"verdict": "PASS", "summary": "All checks pass.", "evidence": ["cargo test: 12 passed"]}),
        ),
        Step::text("Reported."),
    ]);
    let env = hermetic_pi_env(&fake);
    let extension = concat!(env!("CARGO_MANIFEST_DIR"), "/pi-extension/index.ts");
    let argv = env.child_command(&pi, &["-e", extension]);
    let db = env.root.path().join("db.sqlite");
    let mut s = serve_with_pi_children(&db, &env.env, &env.cwd, &argv, "worker", "ses_coordinator");
    let id = s.send(
        "threads_spawn",
        json!({"key": "verify", "title": "Verify", "directory": env.cwd.display().to_string(), "task": "Run the checks and report."}),
    );
    let view = s.response(id, Duration::from_secs(60));
    assert!(view.get("error").is_none(), "{view}");
    let worker_id = view["result"]["details"]["workerID"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        worker_id.starts_with("ses_") && worker_id.len() == 36,
        "{worker_id}"
    );

    // The report arrives as exactly one notice.
    let deadline = Instant::now() + Duration::from_secs(60);
    let notices = loop {
        let n: Vec<Value> = s
            .notifications()
            .into_iter()
            .filter(|n| n["method"] == "notice")
            .collect();
        if !n.is_empty() {
            break n;
        }
        assert!(
            Instant::now() < deadline,
            "no report notice; stderr: {}",
            String::from_utf8_lossy(&s.stderr.lock().unwrap())
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = notices[0]["params"]["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!("Managed worker {worker_id} (verify) report:")),
        "{text}"
    );
    assert!(text.contains("All checks pass."), "{text}");

    // The worker saw its tool result; the list shows the report and the PASS worker hidden.
    fake.wait_for_requests(2, Duration::from_secs(60));
    let id = s.send("threads_list", json!({}));
    let list = s.response(id, Duration::from_secs(30));
    let w = &list["result"]["details"]["workers"][0];
    assert_eq!(w["report"]["verdict"], "PASS", "{list}");
    assert_eq!(w["hidden"], true);
    std::thread::sleep(Duration::from_millis(300));
    let count = s
        .notifications()
        .into_iter()
        .filter(|n| n["method"] == "notice")
        .count();
    assert_eq!(count, 1, "exactly one notice");

    let status = s.close(Duration::from_secs(30));
    assert!(status.success());
    let left = env.leftovers_after(Duration::from_secs(10));
    assert!(left.is_empty(), "{left:?}");
}
