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
        .env("TMPDIR", dir.path())
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
        "session demo-parent \"Plan the API review.\"",
        "    check_examples  /root/api_survey/check_examples  [closed/stopped]",
        "(started by /root/api_survey's own serve)",
        "/root/api_survey/check_examples",
        "thread_closed",
        "(4 rows)",
        "▶ threadbase usage",
        "tree of session demo-parent: 4 threads",
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

#[test]
fn demo_keep_refuses_an_existing_file_and_a_failed_demo_leaves_no_temporary_folder() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let existing = dir.path().join("mine.sqlite");
    std::fs::write(&existing, b"my own data").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .args(["demo", "--keep"])
        .arg(&existing)
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("that file already exists"), "{err}");
    assert!(
        err.contains("Repair: pass a path that does not exist yet"),
        "{err}"
    );
    assert!(
        !err.contains("taskName"),
        "not the model-facing conflict text: {err}"
    );
    assert_eq!(std::fs::read(&existing).unwrap(), b"my own data");

    // A database that cannot be created: the demo fails after making its temporary folder,
    // and removes it.
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .args(["demo", "--keep", "/proc/threadbase-demo.sqlite"])
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// The writing commands leave their database whole in its main file when they end (#28 item
/// 6): a copy of the `.sqlite` alone, without its `-wal`, has every row.
#[test]
fn writing_commands_leave_the_database_whole_in_its_main_file() {
    let dir = tempfile::tempdir().unwrap();
    let exe = env!("CARGO_BIN_EXE_threadbase");
    let keep = dir.path().join("demo.sqlite");
    let out = Command::new(exe)
        .args(["demo", "--keep"])
        .arg(&keep)
        .env("TMPDIR", dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let served = dir.path().join("served.sqlite");
    let mut serve = Command::new(exe)
        .arg("--db")
        .arg(&served)
        .args(["serve", "--session-id", "ses_whole", "--cwd"])
        .arg(dir.path())
        .env("THREADBASE_PI_COMMAND", r#"["/bin/true"]"#)
        .env("PI_CODING_AGENT_DIR", dir.path().join("agent"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = serve.stdin.take().unwrap();
        writeln!(
            stdin,
            r#"{{"id":1,"method":"thread","params":{{"action":"list"}}}}"#
        )
        .unwrap();
    }
    assert!(serve.wait_with_output().unwrap().status.success());
    // The serve registers its contract A manager and its session's contract B registry at its start.
    for (db, table, want) in [(&keep, "threads", 4), (&served, "managers", 2)] {
        let wal = std::fs::metadata(format!("{}-wal", db.display())).map_or(0, |m| m.len());
        assert_eq!(wal, 0, "{}: the WAL holds {wal} bytes", db.display());
        let copy = dir.path().join("copy.sqlite");
        std::fs::copy(db, &copy).unwrap();
        let query = format!("SELECT count(*) AS n FROM {table}");
        let out = crate::support::common::threadbase(&copy, &["sql", "--json", &query]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v[0]["n"], want, "{}", db.display());
        std::fs::remove_file(&copy).unwrap();
        let _ = std::fs::remove_file(dir.path().join("copy.sqlite-wal"));
        let _ = std::fs::remove_file(dir.path().join("copy.sqlite-shm"));
    }
}

/// A reader that stops early (`threadbase demo --keep FILE | head -1`) does not cost the demo
/// its database: the rest of the output is dropped, the demo runs to its end and keeps FILE,
/// then exits quietly as SIGPIPE would (141), as a read command piped into a closed reader does.
#[test]
fn a_reader_that_stops_early_still_gets_the_kept_database() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("demo.sqlite");
    let mut child = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .args(["demo", "--keep"])
        .arg(&kept)
        .env_remove("THREADBASE_DB")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is gone (as `head -1` exits after its line).
    assert!(first.starts_with("threadbase demo: database"), "{first}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(141),
        "{:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows =
        crate::support::common::threadbase(&kept, &["sql", "SELECT count(*) AS n FROM threads"]);
    assert!(rows.status.success(), "{rows:?}");
    assert!(
        !String::from_utf8_lossy(&rows.stdout).contains(" 0\n"),
        "{rows:?}"
    );
    let mut tree = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&kept)
        .arg("tree")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(tree.stdout.take());
    assert_eq!(tree.wait().unwrap().code(), Some(141));
}
