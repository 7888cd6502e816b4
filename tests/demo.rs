//! `threadbase demo` runs on an embedded default and prints the tree, events and SQL.

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn demo_runs_quickly_and_prints_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.path().join("demo.sqlite");
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .args(["demo", "--keep"])
        .arg(&keep)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    for needle in [
        "▶ start /root/api_survey",
        "▶ resume review_docs",
        "▶ fork api_survey",
        "▶ archive api_survey_branch",
        "manager demo-parent (thread)",
        "/root/api_survey/check_examples",
        "thread_closed",
        "(4 rows)",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    // The kept database answers plain SQL: nothing is live after the demo.
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&keep)
        .args(["sql", "--json", "SELECT count(*) AS live FROM live_threads"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["live"], 0);
}
