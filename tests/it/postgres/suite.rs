//! The store's tests once more with every database a PostgreSQL schema: this test runs this
//! same test binary again with `THREADBASE_TEST_BACKEND=postgres` over [`MODULES`] (each test
//! there makes its databases through `support::common::temp_db` or `Scripted`, which then hand
//! out fresh schemas on the test server), so `cargo test` covers both backends in one command.
//! A test of those modules that is about SQLite itself (its file, WAL, pragmas) says so with
//! `support::sql::sqlite_only` and returns on that run. Skips without a server, fails without
//! one under `CI=true`.

use std::process::Command;
use std::time::Instant;

use crate::support::postgres::{backend_is_postgres, url_or_skip, BACKEND_VAR};

/// The modules whose tests run on both backends: the store, serve for the three contracts,
/// the CLI, crash and restore, many writers, fuzzing and the property tests.
pub const MODULES: &[&str] = &[
    "thread::",
    "store::",
    "cli::",
    "cli_sessions::",
    "cli_stop::",
    "cli_tree::",
    "crash_restore::",
    "crash_serve::",
    "many_writers::",
    "concurrency::",
    "check::",
    "usage_cli::",
    "usage_restore::",
    "agent::",
    "worker::",
    "worktrees::",
    "questions::",
    "queue::",
    "races::",
    "spend::",
    "serve_notices::",
    "serve_subtree::",
    "adopt::",
    "session_files::",
    "fuzz_corpus::",
    "fuzz_serve::",
    "prop_paths::",
    "prop_ranges::",
    "prop_refs::",
    "prop_subtree::",
    "prop_usage::",
    "http::",
    "hosts::",
    "budgets::",
    "thread_caps::",
    "attention::",
    "status_line::",
];

#[test]
fn the_store_tests_pass_on_postgresql() {
    if backend_is_postgres() {
        // This is the PostgreSQL run itself.
        return;
    }
    if url_or_skip("the_store_tests_pass_on_postgresql").is_none() {
        return;
    }
    let started = Instant::now();
    let out = Command::new(std::env::current_exe().unwrap())
        .env(BACKEND_VAR, "postgres")
        .args(MODULES)
        // A filter matches anywhere in a test's name (`queue::` in `real_pi_queue::`): real Pi
        // runs once, on SQLite, and the PostgreSQL tests run on their own.
        .args(["--skip", "real_pi_", "--skip", "postgres::"])
        // One at a time: the rest of the suite runs beside it on the same two cores.
        .args(["--test-threads", "1"])
        .output()
        .expect("run the test binary again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let failed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("test ") && l.ends_with("FAILED"))
        .collect();
    let summary = stdout
        .lines()
        .rfind(|l| l.starts_with("test result:"))
        .unwrap_or("(no summary)");
    eprintln!(
        "PostgreSQL run of {} modules: {summary} ({:.0} s)",
        MODULES.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "on PostgreSQL, {} failed:\n{}\n\n{}",
        failed.len(),
        failed.join("\n"),
        failure_sections(&stdout)
    );
}

/// What libtest printed of each failed test (the text between its two `failures:` lines), at
/// most 80 lines each, else the output's last 100 lines: a CI log keeps its head and tail, and
/// the "test … ok" lines before would push the reason out of it.
fn failure_sections(stdout: &str) -> String {
    let sections = stdout
        .find("\nfailures:\n")
        .zip(stdout.rfind("\nfailures:\n"))
        .filter(|(a, b)| a < b)
        .map(|(a, b)| &stdout[a..b]);
    let Some(sections) = sections else {
        let lines: Vec<&str> = stdout.lines().collect();
        return lines[lines.len().saturating_sub(100)..].join("\n");
    };
    let mut out = Vec::new();
    let mut in_section = 0;
    for line in sections.lines() {
        if line.starts_with("---- ") {
            in_section = 0;
        }
        in_section += 1;
        if in_section <= 80 {
            out.push(line);
        } else if in_section == 81 {
            out.push("[… more lines of this test's output left out]");
        }
    }
    out.join("\n")
}

#[test]
fn a_failed_tests_output_is_what_the_postgresql_run_reports() {
    let stdout = "running 2 tests\ntest a::ok ... ok\ntest b::bad ... FAILED\n\nfailures:\n\n---- b::bad stdout ----\nthread 'b::bad' panicked at x.rs:1:1:\nwhy it failed\n\nfailures:\n    b::bad\n\ntest result: FAILED. 1 passed; 1 failed\n";
    let shown = failure_sections(stdout);
    assert!(
        shown.contains(
            "---- b::bad stdout ----\nthread 'b::bad' panicked at x.rs:1:1:\nwhy it failed"
        ),
        "{shown}"
    );
    assert!(!shown.contains("test a::ok"), "{shown}");
    let long = format!(
        "failures:\n\n---- c stdout ----\n{}\nfailures:\n    c\n",
        "line\n".repeat(200)
    );
    let shown = failure_sections(&format!("x\n{long}"));
    assert_eq!(
        shown.lines().filter(|l| *l == "line").count(),
        79,
        "{shown}"
    );
    assert!(
        shown.ends_with("[… more lines of this test's output left out]"),
        "{shown}"
    );
}
