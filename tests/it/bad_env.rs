//! Bad environments: a read-only database file or filesystem, missing and impossible parent
//! folders, a full disk (a real tmpfs filled to ENOSPC), corrupted database files, session files
//! that vanished or broke before a resume, and child commands that do not exist or exit at once.
//!
//! Each case must end with a clear message carrying a `Repair:` hint, a clean exit (non-zero when
//! it is a failure, never a panic or a backtrace, never a hang), and no change to what it should
//! not touch (file bytes and row counts are compared before and after).
//!
//! Some cases need root (chattr, mount). When the test runs without the needed privilege it says
//! so on stderr and checks what it can instead.

use crate::support::common;
use crate::support::serve_client;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_client::{processes_with_env, scripted_command, Serve, ServeSpec};
use threadbase::domain::ThreadId;
use threadbase::store::events::{self, NewEvent};
use threadbase::Store;

const EXE: &str = env!("CARGO_BIN_EXE_threadbase");

fn tb(db: &Path, args: &[&str]) -> Output {
    Command::new(EXE)
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("THREADBASE_DB")
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run threadbase")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// No panic, no backtrace, whatever the outcome.
fn assert_no_panic(text: &str, what: &str) {
    assert!(
        !text.contains("panicked")
            && !text.contains("stack backtrace")
            && !text.contains("RUST_BACKTRACE"),
        "{what}: {text}"
    );
}

/// A failure the way the CLI reports one: exit 2, one `threadbase: error[code]: …` message with
/// a Repair hint that contains every one of `needles`.
fn assert_clean_failure(o: &Output, what: &str, needles: &[&str]) -> String {
    let err = stderr(o);
    assert_no_panic(&err, what);
    assert_eq!(o.status.code(), Some(2), "{what}: {err}");
    assert!(err.starts_with("threadbase: error["), "{what}: {err}");
    assert!(err.contains("Repair:"), "{what}: {err}");
    for n in needles {
        assert!(err.contains(n), "{what}: expected {n:?} in {err}");
    }
    err
}

fn is_root() -> bool {
    rustix::process::getuid().is_root()
}

/// A seeded database: one manager, 60 closed threads with events (enough pages that a damaged
/// middle page hits real data). The store is closed again, so the WAL is checkpointed away.
fn seed(path: &Path) {
    let store = Store::open(path).unwrap();
    let m = common::manager(&store, "ses_bad_env");
    let rows: Vec<_> = (0..60)
        .map(|i| common::thread(&common::tid(i), m, &format!("/root/task_{i}"), false))
        .collect();
    common::add(&store, &rows);
    store
        .write(|tx| {
            for i in 0..60 {
                for j in 0..5 {
                    let data =
                        json!({"text": format!("event {j} of thread {i} {}", "x".repeat(200))})
                            .to_string();
                    events::append(
                        tx,
                        &ThreadId::new(common::tid(i)),
                        &[NewEvent {
                            at: &format!("2026-11-30T00:00:0{j}.000Z"),
                            kind: "assistant_message",
                            data: &data,
                        }],
                    )?;
                }
            }
            Ok(())
        })
        .unwrap();
}

fn count(db: &Path, sql: &str) -> i64 {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    c.query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Starts the thread `task` with `task` as its prompt; it must start.
fn start(s: &mut Serve, task: &str) {
    let r = call(
        s,
        json!({"action": "start", "prompt": task, "taskName": task}),
    );
    assert!(r.get("result").is_some(), "{r}");
}

/// After a write failure has passed, the same serve starts, runs and stops a thread.
fn works_again(s: &mut Serve) {
    start(s, "after");
    let r = call(s, json!({"action": "wait", "id": "after"}));
    assert_eq!(
        r["result"]["details"]["snapshot"]["resultSummary"], "done: after",
        "{r}"
    );
    call(s, json!({"action": "stop", "id": "after"}));
}

/// Runs `serve` on `db` with `requests` on stdin (then EOF) and waits at most 30 s for it.
fn serve_once(db: &Path, cwd: &Path, requests: &[Value]) -> Output {
    let mut child = Command::new(EXE)
        .arg("--db")
        .arg(db)
        .args(["serve", "--session-id", "ses_once", "--cwd"])
        .arg(cwd)
        .env_remove("THREADBASE_DB")
        .env("THREADBASE_PI_COMMAND", r#"["/bin/true"]"#)
        .env("PI_CODING_AGENT_DIR", cwd.join("agent"))
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        for (i, r) in requests.iter().enumerate() {
            let line = json!({"id": i + 1, "method": "thread", "params": r}).to_string();
            // A serve that already exited closes the pipe; that is its answer.
            let _ = writeln!(stdin, "{line}");
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("serve hung on {}: {}", db.display(), stderr(&out));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// [`serve_once`] with one `list`.
fn serve_list(db: &Path, cwd: &Path) -> Output {
    serve_once(db, cwd, &[json!({"action": "list"})])
}

/// [`serve_list`] that must fail cleanly (see [`assert_clean_failure`]) naming `needles`.
fn serve_refuses(db: &Path, cwd: &Path, what: &str, needles: &[&str]) -> Output {
    let out = serve_list(db, cwd);
    let err = assert_clean_failure(&out, what, needles);
    println!("{what}: {err}");
    out
}

/// Runs a command and says whether it succeeded (for mount/chattr, which may be refused).
fn sh(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Undoes `chattr +i` on drop, so the temporary folder can be removed.
struct Immutable(PathBuf);
impl Drop for Immutable {
    fn drop(&mut self) {
        sh("chattr", &["-i", &self.0.display().to_string()]);
    }
}

/// Unmounts on drop (lazily, so a process still inside cannot keep it mounted).
struct Mounted(PathBuf);
impl Mounted {
    fn tmpfs(dir: &Path, size: &str) -> Option<Mounted> {
        std::fs::create_dir_all(dir).unwrap();
        let d = dir.display().to_string();
        sh(
            "mount",
            &["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", &d],
        )
        .then(|| Mounted(dir.into()))
    }
    fn read_only_bind(dir: &Path) -> Option<Mounted> {
        let d = dir.display().to_string();
        if !sh("mount", &["--bind", &d, &d]) {
            return None;
        }
        let m = Mounted(dir.into());
        sh("mount", &["-o", "remount,ro,bind", &d]).then_some(m)
    }
}
impl Drop for Mounted {
    fn drop(&mut self) {
        sh("umount", &["-l", &self.0.display().to_string()]);
    }
}

#[test]
fn a_read_only_database_file_is_refused_by_writers_and_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ro.sqlite");
    seed(&db);
    let before = std::fs::read(&db).unwrap();
    let mut perms = std::fs::metadata(&db).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o444);
    std::fs::set_permissions(&db, perms).unwrap();
    // As root, mode 0444 does not stop a write (CAP_DAC_OVERRIDE); the immutable attribute does.
    let _guard = if is_root() {
        if !sh("chattr", &["+i", &db.display().to_string()]) {
            eprintln!("SKIPPED: running as root and chattr +i is not available on this filesystem, so the file cannot be made read-only for this process; see a_read_only_filesystem_* for the EROFS case");
            return;
        }
        eprintln!("running as root: the file is made read-only with chattr +i (mode 0444 alone does not stop root)");
        Some(Immutable(db.clone()))
    } else {
        None
    };
    let needles = ["cannot be opened for writing", "ro.sqlite"];
    let out = serve_refuses(&db, dir.path(), "serve on a read-only file", &needles);
    assert!(out.stdout.is_empty(), "no response before the refusal");
    let out = tb(&db, &["restore"]);
    assert_clean_failure(
        &out,
        "restore on a read-only file",
        &["cannot be opened for writing"],
    );
    // Reading still works.
    for args in [
        &["list"][..],
        &["sql", "SELECT count(*) FROM threads"],
        &["check"],
    ] {
        let out = tb(&db, args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(std::fs::read(&db).unwrap(), before, "the file is unchanged");
    assert_eq!(count(&db, "SELECT count(*) FROM threads"), 60);
}

#[test]
fn a_read_only_filesystem_is_refused_with_a_repair() {
    let dir = tempfile::tempdir().unwrap();
    let ro = dir.path().join("ro");
    std::fs::create_dir_all(&ro).unwrap();
    let db = ro.join("threadbase.sqlite");
    seed(&db);
    let before = std::fs::read(&db).unwrap();
    let Some(_mount) = Mounted::read_only_bind(&ro) else {
        eprintln!(
            "SKIPPED: a read-only bind mount is not permitted here (needs root / CAP_SYS_ADMIN)"
        );
        return;
    };
    let needles = ["cannot be opened for writing", "Read-only file system"];
    serve_refuses(&db, dir.path(), "serve on a read-only filesystem", &needles);
    // A WAL database cannot be read without creating its -shm file: said plainly.
    for args in [&["list"][..], &["sql", "SELECT 1"], &["check"]] {
        let out = tb(&db, args);
        let err = assert_clean_failure(
            &out,
            &format!("{args:?}"),
            &["is not writable", "-shm", "copy the database"],
        );
        println!("{args:?}: {err}");
    }
    assert_eq!(std::fs::read(&db).unwrap(), before, "the file is unchanged");
    // The advice works: a copy in a writable folder reads.
    let copy = dir.path().join("copy.sqlite");
    std::fs::copy(&db, &copy).unwrap();
    assert!(tb(&copy, &["list"]).status.success());
}

#[test]
fn parent_folders_are_created_and_an_impossible_one_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    // Missing folders are created by the writers.
    let deep = dir.path().join("a/b/c/threadbase.sqlite");
    let out = serve_list(&deep, dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["result"]["details"]["count"], 0, "{answer}");
    assert!(deep.exists());
    assert!(tb(&deep, &["check"]).status.success());

    // Under a regular file no folder can be created.
    let file = dir.path().join("plain_file");
    std::fs::write(&file, "not a folder").unwrap();
    let db = file.join("sub/threadbase.sqlite");
    let needles = ["Cannot create the database folder", "Not a directory"];
    serve_refuses(&db, dir.path(), "serve under a file", &needles);
    let out = tb(&db, &["restore"]);
    assert_clean_failure(&out, "restore under a file", &["No database at"]);
    for args in [&["list"][..], &["sql", "SELECT 1"], &["check"], &["tree"]] {
        let out = tb(&db, args);
        assert_clean_failure(&out, &format!("{args:?} under a file"), &["No database at"]);
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a folder");
    // Nothing else appeared beside it.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    let mut names = names;
    names.sort();
    assert_eq!(names, ["a", "plain_file"]);
}

#[test]
fn a_closed_output_ends_the_command_quietly() {
    // `threadbase sql … | head -1`: the reader leaves early; the writer gets EPIPE.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db.sqlite");
    seed(&db);
    let script = format!(
        "{EXE} --db '{}' sql \"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 300000) SELECT x FROM c\" 2>'{}' | head -c 10 >/dev/null; echo ${{PIPESTATUS[0]}}",
        db.display(),
        dir.path().join("err").display()
    );
    let out = Command::new("bash").args(["-c", &script]).output().unwrap();
    let status = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let err = std::fs::read_to_string(dir.path().join("err")).unwrap();
    println!("exit {status}, stderr {err:?}");
    assert_no_panic(&err, "sql | head");
    assert_eq!(err, "", "nothing to say about a reader that had enough");
    assert_eq!(status, "141", "exits as SIGPIPE would");
}

/// Random bytes from a fixed seed (xorshift), so a failure reproduces.
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

#[test]
fn corrupted_database_files_give_clear_errors_and_stay_untouched_by_readers() {
    let dir = tempfile::tempdir().unwrap();
    let clean = dir.path().join("clean.sqlite");
    seed(&clean);
    let bytes = std::fs::read(&clean).unwrap();
    let pages = bytes.len() / 4096;
    assert!(pages >= 8, "{pages} pages");
    let mut variants: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut header = bytes.clone();
    header[..100].copy_from_slice(&noise(1, 100));
    variants.push(("header", header));
    let mut middle = bytes.clone();
    let from = pages / 2 * 4096;
    middle[from..from + 3 * 4096].copy_from_slice(&noise(2, 3 * 4096));
    variants.push(("middle pages", middle));
    let mut schema = bytes.clone();
    schema[100..4096].copy_from_slice(&noise(3, 4096 - 100));
    variants.push(("schema page", schema));
    variants.push(("truncated", bytes[..bytes.len() / 2].to_vec()));
    variants.push(("all noise", noise(4, bytes.len())));

    for (what, content) in variants {
        let db = dir
            .path()
            .join(format!("{}.sqlite", what.replace(' ', "_")));
        std::fs::write(&db, &content).unwrap();
        let mut outcomes = Vec::new();
        for args in [
            &["list"][..],
            &["sql", "SELECT count(*) FROM thread_events"],
            &["check", "--json"],
        ] {
            let out = tb(&db, args);
            let err = stderr(&out);
            assert_no_panic(&err, what);
            let code = out.status.code().expect("exited, not killed");
            if args[0] == "check" {
                // 1: problems found in a file that could be read; 2: cannot be checked at all.
                assert!(code == 1 || code == 2, "{what}: check exit {code}");
                let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
                assert_eq!(doc["ok"], false, "{what}: {doc}");
                if code == 1 {
                    for p in doc["problems"].as_array().unwrap() {
                        assert!(!p["repair"].as_str().unwrap().is_empty());
                    }
                }
            } else if code != 0 {
                assert_clean_failure(&out, what, &[]);
            }
            if what == "header" || what == "all noise" {
                assert_eq!(code, 2, "{what} {args:?}");
                assert!(
                    err.contains("not a SQLite database") && err.contains("check` included"),
                    "{what}: {err}"
                );
            }
            outcomes.push(format!("{} → {code}", args[0]));
            assert_eq!(
                std::fs::read(&db).unwrap(),
                content,
                "{what}: {args:?} changed the file"
            );
        }
        let out = serve_list(&db, dir.path());
        let err = stderr(&out);
        assert_no_panic(&err, what);
        let code = out.status.code().expect("serve exited, not killed");
        if code != 0 {
            assert_clean_failure(&out, &format!("serve on {what}"), &[]);
        }
        if what == "header" || what == "all noise" {
            assert_eq!(code, 2, "{what}: serve");
            assert_eq!(
                std::fs::read(&db).unwrap(),
                content,
                "{what}: serve changed the file"
            );
        }
        outcomes.push(format!("serve → {code}"));
        println!(
            "{what}: {}; serve stderr: {}",
            outcomes.join(", "),
            err.lines().next().unwrap_or("")
        );
    }
}

/// A test world for serve with scripted children.
struct World {
    dir: tempfile::TempDir,
    marker: String,
}

impl World {
    fn new(script: Value) -> World {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("script.json"), script.to_string()).unwrap();
        World {
            dir,
            marker: format!(
                "bad-env-{}-{}",
                std::process::id(),
                threadbase::ids::random_hex(6)
            ),
        }
    }
    fn serve(&self, db: &Path, pi_command: &str) -> Serve {
        Serve::start(ServeSpec {
            db,
            args: vec![
                "--session-id".into(),
                "ses_bad_env".into(),
                "--cwd".into(),
                self.dir.path().display().to_string(),
            ],
            env: vec![
                ("THREADBASE_PI_COMMAND".into(), pi_command.into()),
                ("THREADBASE_TEST_MARKER".into(), self.marker.clone()),
                (
                    "PI_CODING_AGENT_DIR".into(),
                    self.dir.path().join("agent").display().to_string(),
                ),
                ("RUST_BACKTRACE".into(), "1".into()),
            ],
            cwd: self.dir.path().to_path_buf(),
            clear_env: false,
        })
    }
    fn scripted(&self) -> String {
        scripted_command(&self.dir.path().join("script.json"))
    }
    fn leftovers(&self) -> Vec<u32> {
        processes_with_env("THREADBASE_TEST_MARKER", &self.marker)
    }
    /// `threadbase check` passes on `db`, and no child of this world is left.
    fn check_and_no_leftovers(&self, db: &Path) {
        let out = tb(db, &["check"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(self.leftovers().is_empty());
    }
}

fn call(s: &mut Serve, params: Value) -> Value {
    let id = s.send("thread", params);
    s.response(id, Duration::from_secs(60))
}

fn serve_stderr(s: &Serve) -> String {
    String::from_utf8_lossy(&s.stderr.lock().unwrap()).into_owned()
}

/// Closes `s` (within `timeout`): exit 0, and no panic on its stderr.
fn close_without_panic(mut s: Serve, timeout: Duration) {
    let status = s.close(timeout);
    assert_no_panic(&serve_stderr(&s), "serve");
    assert!(status.success(), "{status:?}");
}

/// Starts threads `<prefix>_<i>` (`i` below `tries`) with prompts of `size` more bytes, stopping
/// each that starts, until three starts have failed; each failure must be an `io` error whose
/// message has a Repair hint and passes `check`. Prints how it went (`while`: under what);
/// returns the failures' messages.
fn starts_until_writes_fail(
    s: &mut Serve,
    prefix: &str,
    tries: usize,
    size: usize,
    while_: &str,
    check: impl Fn(&str),
) -> Vec<String> {
    let (mut ok, mut failed) = (0, Vec::new());
    for i in 0..tries {
        let task = format!("{prefix}_{i}");
        let prompt = format!("{prefix} {i} {}", "y".repeat(size));
        let r = call(
            s,
            json!({"action": "start", "prompt": prompt, "taskName": task}),
        );
        if let Some(e) = r.get("error") {
            assert_eq!(e["code"], "io", "{e}");
            let msg = e["message"].as_str().unwrap();
            assert!(msg.contains("Repair:"), "{msg}");
            check(msg);
            failed.push(msg.to_string());
            if failed.len() >= 3 {
                break;
            }
        } else {
            ok += 1;
            call(s, json!({"action": "stop", "id": task}));
        }
    }
    println!(
        "{while_}: {ok} starts went through, {} failed; first failure: {}",
        failed.len(),
        failed.first().map_or("", |s| s)
    );
    failed
}

/// Lists, closes the serve (exit 0, no panic on its stderr) and checks that the database holds
/// exactly the threads listed and passes `threadbase check`, and that no child is left; returns
/// the list's answer.
fn close_consistent(mut s: Serve, w: &World, db: &Path) -> Value {
    let r = call(&mut s, json!({"action": "list"}));
    let listed = r["result"]["details"]["count"].as_i64().unwrap();
    let status = s.close(Duration::from_secs(30));
    let err = serve_stderr(&s);
    assert_no_panic(&err, "serve");
    assert!(status.success(), "{status:?}: {err}");
    println!("serve stderr: {err}");
    assert_eq!(count(db, "SELECT count(*) FROM threads"), listed);
    // The file is consistent: no half-written request.
    let out = tb(db, &["check", "--json"]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    assert!(w.leftovers().is_empty(), "{:?}", w.leftovers());
    r
}

/// Writes a filler file until the filesystem refuses with ENOSPC.
fn fill(path: &Path) -> u64 {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0x5a_u8; 16 * 1024];
    let mut written = 0u64;
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(28), "expected ENOSPC, got {e}");
                break;
            }
        }
    }
    let _ = f.sync_all();
    written
}

#[test]
fn a_full_disk_fails_requests_cleanly_and_serve_recovers_when_space_returns() {
    let w = World::new(json!({"turns": [{"steps": [{"text": "done: {prompt}", "deltas": 2}]}]}));
    let fs = w.dir.path().join("fs");
    if !is_root() {
        eprintln!(
            "SKIPPED: mounting a small tmpfs needs root; nothing else can give a real ENOSPC here"
        );
        return;
    }
    let Some(_mount) = Mounted::tmpfs(&fs, "3m") else {
        eprintln!("SKIPPED: mount -t tmpfs is not permitted in this container");
        return;
    };
    println!("using a real full filesystem: a 3 MiB tmpfs filled to ENOSPC");
    let db = fs.join("threadbase.sqlite");
    let mut s = w.serve(&db, &w.scripted());
    start(&mut s, "before");
    call(&mut s, json!({"action": "wait", "id": "before"}));
    call(&mut s, json!({"action": "stop", "id": "before"}));

    let filler = fs.join("filler");
    let filled = fill(&filler);
    println!("filled {filled} bytes");
    // Requests that write now fail; each failure is an `io` error with a Repair hint and the
    // serve stays up. (A few may still fit into pages the WAL already holds.)
    let failed = starts_until_writes_fail(&mut s, "full", 200, 4000, "while full", |msg| {
        assert!(
            msg.contains("disk is full") || msg.contains("could not be read or written"),
            "{msg}"
        );
    });
    assert!(!failed.is_empty(), "the full disk never surfaced");
    // Reads still answer while the disk is full.
    let r = call(&mut s, json!({"action": "list"}));
    assert!(r.get("result").is_some(), "{r}");

    // Space comes back: the same serve works again.
    std::fs::remove_file(&filler).unwrap();
    works_again(&mut s);
    // Every thread the serve reports exists, and none claims a process.
    let r = close_consistent(s, &w, &db);
    assert_eq!(r["result"]["details"]["liveCount"], 0, "{r}");
    assert_eq!(
        count(&db, "SELECT count(*) FROM threads WHERE status = 'live'"),
        0
    );
}

/// Sets the soft RLIMIT_FSIZE of `pid` (the hard limit is kept, so it can be raised again).
fn set_file_size_limit(pid: u32, soft: Option<u64>) {
    use rustix::process::{prlimit, Pid, Resource, Rlimit};
    let pid = Pid::from_raw(pid as i32).unwrap();
    // The serve inherited this process's limits; keep its hard limit.
    let old = rustix::process::getrlimit(Resource::Fsize);
    prlimit(
        Some(pid),
        Resource::Fsize,
        Rlimit {
            current: soft,
            maximum: old.maximum,
        },
    )
    .expect("set RLIMIT_FSIZE");
}

/// An injected but real OS write failure, for machines where no small filesystem can be
/// mounted: RLIMIT_FSIZE on the running serve makes its writes past the limit fail with EFBIG
/// (SQLite's disk I/O error). The serve must survive it (SIGXFSZ would otherwise kill it),
/// answer with `io` errors, and work again once the limit is lifted.
#[test]
fn a_file_size_limit_fails_writes_cleanly_and_serve_recovers() {
    let w = World::new(json!({"turns": [{"steps": [{"text": "done: {prompt}", "deltas": 2}]}]}));
    let db = w.dir.path().join("db.sqlite");
    let mut s = w.serve(&db, &w.scripted());
    start(&mut s, "before");
    call(&mut s, json!({"action": "stop", "id": "before"}));
    // A thread that is still running when the limit hits: its stop cannot be recorded at first.
    start(&mut s, "held");
    call(&mut s, json!({"action": "wait", "id": "held"}));
    // And one whose child will die while writes fail: its exit cannot be recorded at first.
    start(&mut s, "crashy");
    call(&mut s, json!({"action": "wait", "id": "crashy"}));
    let crashy_pid = count(&db, "SELECT pid FROM threads WHERE path = '/root/crashy'");
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    let limit = size(&db).max(size(&wal)) + 4096;
    set_file_size_limit(s.child.id(), Some(limit));
    println!(
        "RLIMIT_FSIZE of serve set to {limit} bytes (db {} bytes, wal {} bytes)",
        size(&db),
        size(&wal)
    );
    let failed = starts_until_writes_fail(&mut s, "big", 300, 8000, "under the limit", |_| {});
    assert!(!failed.is_empty(), "the limit never surfaced");
    let r = call(&mut s, json!({"action": "stop", "id": "held"}));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(crashy_pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    println!(
        "stop while limited: {}",
        r.get("error")
            .unwrap_or(&r["result"]["details"]["snapshot"]["status"])
    );
    assert!(
        s.child.try_wait().unwrap().is_none(),
        "serve died: {}",
        serve_stderr(&s)
    );
    let r = call(&mut s, json!({"action": "list"}));
    assert!(r.get("result").is_some(), "{r}");
    set_file_size_limit(s.child.id(), None);
    // The exit that could not be recorded is recorded once writes work again (the serve retries
    // it), so no row keeps claiming a process that is gone.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = call(&mut s, json!({"action": "poll", "id": "crashy"}));
        let snap = &r["result"]["details"]["snapshot"];
        if snap["status"] == "closed" {
            println!("crashy: {}", snap["exit"]);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the exit of crashy was never recorded: {snap}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A stop refused while writes failed changed nothing (the child still runs); it works now.
    let r = call(&mut s, json!({"action": "poll", "id": "held"}));
    let snap = &r["result"]["details"]["snapshot"];
    if snap["status"] == "live" {
        assert_eq!(snap["running"], true, "a live row has its process: {snap}");
        let r = call(&mut s, json!({"action": "stop", "id": "held"}));
        assert_eq!(
            r["result"]["details"]["snapshot"]["exit"]["kind"], "stopped",
            "{r}"
        );
    }
    works_again(&mut s);
    close_consistent(s, &w, &db);
}

#[test]
fn session_files_that_vanished_or_broke_before_resume() {
    // thread/tour.rs covers a removed session file; these are the other ways it goes away.
    let w = World::new(json!({"turns": [{"steps": [{"text": "ok {prompt}"}]}]}));
    let db = w.dir.path().join("db.sqlite");
    let mut s = w.serve(&db, &w.scripted());
    let cases = [
        "folder removed",
        "replaced by a folder",
        "garbage",
        "empty",
        "removed while live",
    ];
    for (i, what) in cases.iter().enumerate() {
        let task = format!("case_{i}");
        let r = call(
            &mut s,
            json!({"action": "start", "prompt": what, "taskName": task}),
        );
        let file = PathBuf::from(
            r["result"]["details"]["snapshot"]["session"]["file"]
                .as_str()
                .unwrap(),
        );
        call(&mut s, json!({"action": "wait", "id": task}));
        if *what == "removed while live" {
            std::fs::remove_file(&file).unwrap();
        }
        call(&mut s, json!({"action": "stop", "id": task}));
        match *what {
            "folder removed" => {
                // Other threads' files share the folder: move it aside and back afterwards.
                std::fs::rename(file.parent().unwrap(), w.dir.path().join("aside")).unwrap();
            }
            "replaced by a folder" => {
                std::fs::remove_file(&file).unwrap();
                std::fs::create_dir(&file).unwrap();
            }
            "garbage" => std::fs::write(&file, noise(9, 3000)).unwrap(),
            "empty" => std::fs::write(&file, "").unwrap(),
            _ => {}
        }
        let before = call(&mut s, json!({"action": "poll", "id": task}));
        let r = call(&mut s, json!({"action": "resume", "id": task}));
        println!(
            "{what}: {}",
            r.get("error").unwrap_or(&r["result"]["content"][0]["text"])
        );
        let e = r
            .get("error")
            .unwrap_or_else(|| panic!("{what}: resume should fail: {r}"));
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains("Repair:"), "{what}: {msg}");
        assert!(
            ["not_resumable", "io", "invalid_params"].contains(&e["code"].as_str().unwrap()),
            "{what}: {e}"
        );
        // Nothing changed: still closed, same exit, no process.
        let after = call(&mut s, json!({"action": "poll", "id": task}));
        let snap = |v: &Value| {
            let d = &v["result"]["details"]["snapshot"];
            (
                d["status"].clone(),
                d["phase"].clone(),
                d["exit"].clone(),
                d["lastEventAt"].clone(),
            )
        };
        assert_eq!(snap(&after), snap(&before), "{what}");
        // A fork of it fails as clearly.
        let r = call(&mut s, json!({"action": "fork", "id": task}));
        if let Some(e) = r.get("error") {
            assert!(
                e["message"].as_str().unwrap().contains("Repair:"),
                "{what}: fork {e}"
            );
        } else {
            panic!("{what}: fork of a thread with a broken session should fail: {r}");
        }
        if *what == "folder removed" {
            std::fs::rename(w.dir.path().join("aside"), file.parent().unwrap()).unwrap();
        }
    }
    close_without_panic(s, Duration::from_secs(30));
    w.check_and_no_leftovers(&db);
}

#[test]
fn child_commands_that_do_not_exist_or_exit_at_once() {
    let w = World::new(json!({"turns": []}));
    let db = w.dir.path().join("db.sqlite");
    let text_file = w.dir.path().join("not_a_program.txt");
    std::fs::write(&text_file, "hello").unwrap();
    // Spawn failures: an `io` error that names THREADBASE_PI_COMMAND, and a closed/failed row.
    let cannot_start = [
        json!(["threadbase-no-such-program-on-path"]),
        json!([text_file.display().to_string()]),
        json!([w.dir.path().display().to_string()]),
    ];
    for (i, cmd) in cannot_start.iter().enumerate() {
        let mut s = w.serve(&db, &cmd.to_string());
        let task = format!("spawn_{i}");
        let r = call(
            &mut s,
            json!({"action": "start", "prompt": "x", "taskName": task}),
        );
        let e = r.get("error").unwrap_or_else(|| panic!("{cmd}: {r}"));
        assert_eq!(e["code"], "io", "{e}");
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.contains("Repair: check that THREADBASE_PI_COMMAND"),
            "{msg}"
        );
        println!("{cmd}: {msg}");
        let r = call(&mut s, json!({"action": "poll", "id": task}));
        let snap = &r["result"]["details"]["snapshot"];
        assert_eq!(
            (snap["status"].as_str(), snap["exit"]["kind"].as_str()),
            (Some("closed"), Some("failed")),
            "{r}"
        );
        // Resume fails the same way and leaves the row closed.
        let r = call(&mut s, json!({"action": "resume", "id": task}));
        assert_eq!(r["error"]["code"], "io", "{r}");
        let r = call(&mut s, json!({"action": "poll", "id": task}));
        assert_eq!(r["result"]["details"]["snapshot"]["status"], "closed");
        close_without_panic(s, Duration::from_secs(20));
    }
    // Programs that start and exit at once: the start says so (with a Repair hint), the row is
    // closed with the real exit, wait returns at once, and resume says the same.
    let exits = [
        (json!(["/bin/true"]), "exited", Some(0)),
        (json!(["/bin/sh", "-c", "exit 3"]), "failed", Some(3)),
    ];
    for (i, (cmd, kind, code)) in exits.iter().enumerate() {
        let mut s = w.serve(&db, &cmd.to_string());
        let task = format!("exit_{i}");
        let r = call(
            &mut s,
            json!({"action": "start", "prompt": "x", "taskName": task}),
        );
        let result = r.get("result").unwrap_or_else(|| panic!("{cmd}: {r}"));
        let text = result["content"][0]["text"].as_str().unwrap();
        println!("{cmd}: {text}");
        assert!(
            text.contains("exited before it answered") && text.contains("Repair:"),
            "{text}"
        );
        let snap = &result["details"]["snapshot"];
        assert_eq!(
            snap["status"], "closed",
            "{cmd}: the start result shows the recorded exit: {snap}"
        );
        assert_eq!(snap["exit"]["kind"], *kind, "{snap}");
        // The exit code is in `code` (exited) or in the message (failed).
        let code = code.unwrap();
        assert!(
            snap["exit"]["code"] == json!(code)
                || snap["exit"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(&format!("code {code}"))),
            "{snap}"
        );
        let started = Instant::now();
        let r = call(
            &mut s,
            json!({"action": "wait", "id": task, "timeoutMs": 30000}),
        );
        assert_eq!(r["result"]["details"]["timedOut"], false, "{r}");
        println!("{cmd}: wait answered in {:?}", started.elapsed());
        let r = call(&mut s, json!({"action": "resume", "id": task}));
        let result = r.get("result").unwrap_or_else(|| panic!("{cmd}: {r}"));
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("exited before it answered"), "{text}");
        assert_eq!(
            result["details"]["snapshot"]["status"], "closed",
            "{result}"
        );
        let r = call(
            &mut s,
            json!({"action": "send", "id": task, "message": "hello?"}),
        );
        assert_eq!(r["error"]["code"], "closed", "{r}");
        close_without_panic(s, Duration::from_secs(20));
    }
    assert_eq!(
        count(&db, "SELECT count(*) FROM threads WHERE status = 'live'"),
        0
    );
    w.check_and_no_leftovers(&db);
}

/// An empty file and another program's SQLite database are named as what they are by every
/// command (never "no such table", never migrated into a threadbase database), and their bytes
/// stay as they were; serve still makes a new database in an empty file.
#[test]
fn an_empty_file_or_another_programs_database_is_named_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    let other = dir.path().join("notes.sqlite");
    {
        let conn = rusqlite::Connection::open(&other).unwrap();
        conn.execute_batch("CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes(body) VALUES ('keep me');")
            .unwrap();
    }
    let other_bytes = std::fs::read(&other).unwrap();
    let commands: [&[&str]; 9] = [
        &["tree"],
        &["list"],
        &["show", "x"],
        &["events", "x"],
        &["usage"],
        &["sql", "SELECT 1"],
        &["check"],
        &["restore"],
        &["stop", "**"],
    ];
    for args in commands {
        let out = tb(&empty, args);
        let err = assert_clean_failure(
            &out,
            &format!("{args:?} on an empty file"),
            &["is an empty database", "threadbase serve", "demo --keep"],
        );
        assert!(!err.contains("no such table"), "{args:?}: {err}");
        assert_eq!(
            std::fs::read(&empty).unwrap(),
            b"",
            "{args:?} wrote to the empty file"
        );
        let out = tb(&other, args);
        assert_clean_failure(
            &out,
            &format!("{args:?} on another program's database"),
            &[
                "not a threadbase database",
                "its tables: notes",
                "nothing in it was read or changed",
            ],
        );
        assert_eq!(
            std::fs::read(&other).unwrap(),
            other_bytes,
            "{args:?} changed it"
        );
    }
    println!("{}", stderr(&tb(&empty, &["restore"])));
    println!("{}", stderr(&tb(&other, &["restore"])));
    serve_refuses(
        &other,
        dir.path(),
        "serve on another program's database",
        &["not a threadbase database", "its tables: notes"],
    );
    assert_eq!(
        std::fs::read(&other).unwrap(),
        other_bytes,
        "serve changed it"
    );
    // Serve makes its database in an empty file, as in a new one.
    let out = serve_list(&empty, dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(tb(&empty, &["check"]).status.success());
}

/// A missing database: every command that reads or changes one says how one comes to exist.
#[test]
fn a_missing_database_says_how_one_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("missing.sqlite");
    for args in [
        &["tree"][..],
        &["sql", "SELECT 1"],
        &["check"],
        &["restore"],
        &["stop", "**"],
    ] {
        let out = tb(&db, args);
        assert_clean_failure(
            &out,
            &format!("{args:?}"),
            &["No database at", "threadbase serve", "demo --keep FILE"],
        );
        assert!(!db.exists(), "{args:?} created it");
    }
}

/// `top` without a terminal says it needs one and what to use instead, not an I/O error.
#[test]
fn top_without_a_terminal_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.sqlite");
    seed(&db);
    let out = Command::new(EXE)
        .arg("--db")
        .arg(&db)
        .arg("top")
        .stdin(Stdio::null())
        .env_remove("THREADBASE_DB")
        .output()
        .unwrap();
    let err = assert_clean_failure(
        &out,
        "top without a terminal",
        &["needs a terminal", "threadbase tree", "threadbase list"],
    );
    assert!(!err.contains("os error"), "{err}");
    assert!(out.stdout.is_empty(), "no escape sequences on a pipe");
}

/// A database in a folder where no file can be made (immutable here, as root; read-only for
/// another user): serve says which folder and why SQLite needs it writable, and nothing appears.
#[test]
fn a_folder_that_takes_no_new_file_is_named_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("locked");
    std::fs::create_dir_all(&folder).unwrap();
    let db = folder.join("threadbase.sqlite");
    seed(&db);
    let before = std::fs::read(&db).unwrap();
    let names = || {
        let mut names: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let files_before = names();
    let _guard = if is_root() {
        if !sh("chattr", &["+i", &folder.display().to_string()]) {
            eprintln!("SKIPPED: running as root and chattr +i is not available on this filesystem, so the folder cannot be made to refuse new files for this process");
            return;
        }
        Some(Immutable(folder.clone()))
    } else {
        let mut perms = std::fs::metadata(&folder).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o555);
        std::fs::set_permissions(&folder, perms).unwrap();
        None
    };
    let needles = ["lets no new file be made", "-wal and -shm", "locked"];
    serve_refuses(&db, dir.path(), "serve on a database there", &needles);
    let out = tb(&db, &["restore"]);
    assert_clean_failure(&out, "restore of a database there", &needles);
    let fresh = folder.join("new.sqlite");
    serve_refuses(
        &fresh,
        dir.path(),
        "serve on a new database there",
        &needles,
    );
    let out = tb(&db, &["list"]);
    assert_clean_failure(&out, "list there", &["is not writable", "-shm"]);
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the database is unchanged"
    );
    assert_eq!(names(), files_before, "nothing was made beside it");
}
