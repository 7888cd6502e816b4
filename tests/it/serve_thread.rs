//! The `thread` tool through a real `threadbase serve` process whose children are
//! `threadbase scripted-agent` processes: every action and the main error paths.

use crate::support::common;
use crate::support::serve_client;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::keys;
use serde_json::{json, Value};
use serve_client::{scripted_command, session_user_texts, Scripted, Serve};

struct World {
    base: Scripted,
    parent_session: PathBuf,
}

fn world(script: Value) -> World {
    let base = Scripted::new("serve");
    let lines = [
        json!({"type":"session","version":3,"id":"ses_parent","timestamp":"2026-11-30T00:00:00.000Z","cwd":base.root}),
        json!({"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-11-30T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"hello"}],"timestamp":1}}),
        json!({"type":"message","id":"a0000002","parentId":"a0000001","timestamp":"2026-11-30T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi there"}],"stopReason":"stop","timestamp":2}}),
    ];
    let parent_session = base.session_file("sessions/parent.jsonl", &lines);
    base.script("script", &script.to_string());
    World {
        base,
        parent_session,
    }
}

/// A world with `script` (JSON text) and its first serve.
fn with_serve(script: &str) -> (World, Serve) {
    let w = world(serde_json::from_str(script).unwrap());
    let s = w.serve(&[]);
    (w, s)
}

impl World {
    /// Closes `s` (waiting up to 20 s) and finds nothing this world started still running.
    fn close_all(&self, mut s: Serve) {
        s.close(Duration::from_secs(20));
        assert!(self.base.leftovers().is_empty());
    }

    fn serve(&self, extra_env: &[(&str, &str)]) -> Serve {
        let args = vec![
            "--session-file".into(),
            self.parent_session.display().to_string(),
        ];
        self.base.serve("script", args, extra_env)
    }

    /// `threadbase serve` on the parent session, for a test that wires its stdio itself.
    fn serve_command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"));
        cmd.arg("--db")
            .arg(&self.base.db)
            .args(["serve", "--session-file"])
            .arg(&self.parent_session)
            .env(
                "THREADBASE_PI_COMMAND",
                scripted_command(&self.base.root.join("script.json")),
            );
        cmd
    }

    /// [`World::serve_command`] started with `stdin` and `stdout`, its stderr discarded.
    fn spawn_serve(
        &self,
        stdin: impl Into<std::process::Stdio>,
        stdout: impl Into<std::process::Stdio>,
    ) -> std::process::Child {
        self.serve_command()
            .stdin(stdin)
            .stdout(stdout)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }
}

/// Writes the request line of a `list` with `id` for a serve whose stdio a test wired itself.
fn write_list(to_serve: &mut impl std::io::Write, id: u64) {
    writeln!(
        to_serve,
        r#"{{"id": {id}, "method": "thread", "params": {{"action": "list"}}}}"#
    )
    .unwrap();
}

/// Reads one response line (into `line`, cleared first) and parses it.
fn read_reply(from_serve: &mut impl std::io::BufRead, line: &mut String) -> Value {
    line.clear();
    from_serve.read_line(line).unwrap();
    serde_json::from_str(line).expect("a whole line")
}

fn details(r: &Value) -> &Value {
    &r["details"]
}

/// A snapshot's status, phase and exit kind.
fn status_phase_exit(snap: &Value) -> (Option<&str>, Option<&str>, Option<&str>) {
    (
        snap["status"].as_str(),
        snap["phase"].as_str(),
        snap["exit"]["kind"].as_str(),
    )
}

/// An error's message.
fn message(e: &Value) -> &str {
    e["message"].as_str().unwrap()
}

fn text(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap()
}

/// The fields every single-thread result has (in this order), before its kind's own.
const SINGLE: [&str; 6] = [
    "kind",
    "snapshot",
    "thread",
    "running",
    "detail",
    "nextSuggestedActions",
];

const SCRIPT: &str =
    r#"{"turns": [{"steps": [{"delay_ms": 150}, {"text": "answer to {prompt}", "deltas": 3}]}]}"#;

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
fn limits_and_settings() {
    let w = world(serde_json::from_str(SCRIPT).unwrap());
    let mut s = w.serve(&[
        ("PI_THREADS_MAX_THREADS", "1"),
        ("PI_THREADS_IDLE_CLEANUP_MS", "soon"),
    ]);
    let one = s.thread(json!({"action": "start", "prompt": "one"}));
    let e = s.thread_error(json!({"action": "start", "prompt": "two"}));
    assert_eq!(e["code"], "limit");
    assert!(
        message(&e).starts_with("pi-threads live thread limit reached: 1/1"),
        "{e}"
    );
    // Once the first is idle, the refusal names it as what holds the slot, and says how idle
    // threads are freed (idle cleanup is off: "soon" is not a number).
    let id = one["details"]["snapshot"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let path = one["details"]["snapshot"]["path"]
        .as_str()
        .unwrap()
        .to_string();
    s.thread(json!({"action": "wait", "id": id, "timeoutMs": 20000}));
    let e = s.thread_error(json!({"action": "start", "prompt": "two"}));
    let text = message(&e);
    assert!(
        text.starts_with("pi-threads live thread limit reached: 1/1. Idle threads hold slots"),
        "{text}"
    );
    for needle in [
        &path,
        &id,
        "stop the idle threads",
        "PI_THREADS_IDLE_CLEANUP_MS (off by default)",
    ] {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }
    s.close(Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&s.stderr.lock().unwrap()).into_owned();
    assert!(stderr.contains(r#"[pi-threads] Ignoring invalid PI_THREADS_IDLE_CLEANUP_MS="soon" (expected a non-negative integer); using default."#), "{stderr}");

    let mut s = w.serve(&[("PI_THREADS_DEPTH", "2")]);
    let e = s.thread_error(json!({"action": "start", "prompt": "deep"}));
    assert_eq!(e["code"], "limit");
    assert!(
        message(&e).starts_with("pi-threads recursion depth 2 has reached PI_THREADS_MAX_DEPTH=2")
    );
    let e = s.thread_error(json!({"action": "start", "prompt": "x", "args": ["--model=foo"]}));
    assert!(message(&e).contains("Unsupported child Pi arg") || e["code"] == "limit");
    w.close_all(s);
}

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

/// A write waiting for the database lock (another process holds it) waits off the runtime's
/// workers: with more such writes queued than there are workers, a poll is still answered.
#[test]
fn writes_waiting_for_the_lock_do_not_hold_up_a_poll() {
    let (w, mut s) = with_serve(SCRIPT);
    for name in ["a", "b", "c", "d"] {
        s.thread(json!({"action": "start", "prompt": "work", "taskName": name}));
        s.thread(json!({"action": "stop", "id": name}));
    }
    let mut other = rusqlite::Connection::open(&w.base.db).unwrap();
    let lock = other
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    let archives: Vec<u64> = ["a", "b", "c"]
        .iter()
        .map(|name| s.send("thread", json!({"action": "archive", "id": name})))
        .collect();
    // The poll is answered while the lock is still held (the archives are all waiting).
    let poll = s.send("thread", json!({"action": "poll", "id": "d"}));
    let p = s.response(poll, Duration::from_secs(20));
    assert_eq!(p["result"]["details"]["snapshot"]["status"], "closed");
    assert_eq!(
        s.answer_count(archives[0]),
        0,
        "the archive waits for the lock"
    );
    lock.rollback().unwrap();
    for id in archives {
        let r = s.response(id, Duration::from_secs(20));
        assert_eq!(r["result"]["details"]["archived"], true, "{r}");
    }
    w.close_all(s);
}

/// serve reads and writes its pipes non-blocking (see `src/serve/stdio.rs`, `src/serve/output.rs`), which
/// changes the open file descriptions it shares with whoever gave it the pipes; it puts the
/// flags back on exit.
#[test]
fn serve_puts_back_the_flags_of_the_pipes_it_was_given() {
    let w = world(serde_json::from_str(SCRIPT).unwrap());
    let (requests, mut to_serve) = std::io::pipe().unwrap();
    let (from_serve, responses) = std::io::pipe().unwrap();
    // Same open file descriptions as serve's stdin and stdout.
    let (stdin_seen, stdout_seen) = (
        requests.try_clone().unwrap(),
        responses.try_clone().unwrap(),
    );
    let nonblocking = |fd: &dyn std::os::fd::AsFd| {
        rustix::fs::fcntl_getfl(fd.as_fd())
            .unwrap()
            .contains(rustix::fs::OFlags::NONBLOCK)
    };
    assert!(!nonblocking(&stdin_seen) && !nonblocking(&stdout_seen));
    let mut child = w.spawn_serve(requests, responses);
    write_list(&mut to_serve, 1);
    let r = read_reply(&mut std::io::BufReader::new(from_serve), &mut String::new());
    assert_eq!(r["result"]["details"]["count"], 0, "{r}");
    assert!(
        nonblocking(&stdin_seen) && nonblocking(&stdout_seen),
        "while it runs, serve polls stdin and writes stdout without blocking"
    );
    drop(to_serve);
    assert!(child.wait().unwrap().success());
    assert!(!nonblocking(&stdin_seen), "stdin's flags put back");
    assert!(!nonblocking(&stdout_seen), "stdout's flags put back");
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

#[test]
fn a_missing_child_program_is_a_clear_error_and_nothing_stays_live() {
    let w = world(serde_json::from_str(SCRIPT).unwrap());
    let args = vec![
        "--session-file".into(),
        w.parent_session.display().to_string(),
    ];
    let missing = [("THREADBASE_PI_COMMAND", r#"["/nonexistent/pi"]"#)];
    let mut s = w.base.serve("script", args, &missing);
    let e = s.thread_error(json!({"action": "start", "prompt": "x", "taskName": "ghost"}));
    assert_eq!(e["code"], "io");
    assert!(
        message(&e).contains("Repair: check that THREADBASE_PI_COMMAND"),
        "{e}"
    );
    let r = s.thread(json!({"action": "poll", "id": "ghost"}));
    let snap = &details(&r)["snapshot"];
    assert_eq!(
        status_phase_exit(snap),
        (Some("closed"), Some("failed"), Some("failed"))
    );
    s.close(Duration::from_secs(10));
}

#[test]
fn rows_written_by_other_processes_reach_the_owning_serve() {
    let w = world(json!({"turns": [{"steps": [{"delay_ms": 30000}, {"text": "never"}]}]}));
    let mut s = w.serve(&[]);
    let r = s.thread(json!({"action": "start", "prompt": "long job", "taskName": "long"}));
    let id = details(&r)["snapshot"]["id"].as_str().unwrap().to_string();
    let conn = rusqlite::Connection::open(&w.base.db).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    // A notice for this session's caller, written by another process: delivered once.
    conn.execute(
        "INSERT INTO mailbox (thread_id, direction, kind, message_id, body, created_at) VALUES (?1, 'to_parent', 'notice', 'msg_1', 'hello from elsewhere', 'now')",
        [&id],
    )
    .unwrap();
    // An emergency stop request, as `threadbase top` writes it.
    let started = std::time::Instant::now();
    conn.execute(
        "INSERT INTO commands (thread_id, kind, created_at) VALUES (?1, 'force_stop', 'now')",
        [&id],
    )
    .unwrap();
    loop {
        let (state, result): (String, Option<String>) = conn
            .query_row("SELECT state, result FROM commands", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        if state == "done" {
            assert_eq!(result.as_deref(), Some("stopped"));
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the stop request was not carried out"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status: String = conn
        .query_row("SELECT status FROM threads WHERE id = ?1", [&id], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(status, "closed");
    // The stop came from another process: the thread's own notice follows the inserted one.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while s.notices().len() < 2 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let notices = s.notices();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert_eq!(notices[0]["params"]["text"], "hello from elsewhere");
    assert_eq!(notices[0]["params"]["path"], "/root/long");
    assert_eq!(
        notices[1]["params"]["text"],
        "Thread \"long job\" (/root/long) was stopped: closed/stopped."
    );
    let undelivered: i64 = conn
        .query_row(
            "SELECT count(*) FROM mailbox WHERE state <> 'delivered'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(undelivered, 0);
    s.close(Duration::from_secs(10));
    assert!(w.base.leftovers().is_empty());
}

/// One socket as both stdin and stdout (one open file description): serve leaves it blocking,
/// so its blocking stdout writes never meet `WouldBlock`, and answers as usual.
#[test]
fn serve_answers_over_one_socket_for_stdin_and_stdout() {
    use std::os::fd::OwnedFd;
    let w = world(serde_json::from_str(SCRIPT).unwrap());
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    // The same open file description as serve's stdin and stdout.
    let seen = theirs.try_clone().unwrap();
    let stdin = OwnedFd::from(theirs.try_clone().unwrap());
    let stdout = OwnedFd::from(theirs);
    let mut child = w.spawn_serve(stdin, stdout);
    let mut writer = ours.try_clone().unwrap();
    let mut reader = std::io::BufReader::new(ours);
    let mut line = String::new();
    for id in 1..=3 {
        write_list(&mut writer, id);
        let r = read_reply(&mut reader, &mut line);
        assert_eq!(r["id"], id, "{r}");
        assert_eq!(r["result"]["details"]["count"], 0, "{r}");
    }
    assert!(
        !rustix::fs::fcntl_getfl(&seen)
            .unwrap()
            .contains(rustix::fs::OFlags::NONBLOCK),
        "a socket that is both stdin and stdout stays blocking"
    );
    writer.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(child.wait().unwrap().success());
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

/// A closed thread's poll and list answers are kept (`thread_snapshots`) after the first read,
/// and a later read gives the same answer from them; a change of the thread (archive) drops them,
/// so the next poll and list say what is true.
#[test]
fn kept_answers_are_the_rendered_ones_and_a_change_drops_them() {
    let (w, mut s) = with_serve(SCRIPT);
    s.thread(json!({"action": "start", "prompt": "Say hi", "taskName": "hi"}));
    s.thread(json!({"action": "wait", "id": "hi", "timeoutMs": 20000}));
    s.thread(json!({"action": "stop", "id": "hi"}));
    let kept = |view: &str| -> i64 {
        let conn = rusqlite::Connection::open(&w.base.db).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .unwrap();
        conn.query_row(
            "SELECT count(*) FROM thread_snapshots t JOIN threads h ON h.id = t.thread_id
             WHERE h.path = '/root/hi' AND t.view = ?1 AND t.shape = ?2",
            [view, threadbase::store::snapshots::SHAPE],
            |r| r.get(0),
        )
        .unwrap()
    };
    let wait_kept = |view: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while kept(view) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "no kept {view} answer"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let poll = json!({"action": "poll", "id": "hi"});
    let list = json!({"action": "list", "state": "closed"});
    let rendered_poll = s.thread(poll.clone());
    let rendered_list = s.thread(list.clone());
    assert_eq!(details(&rendered_poll)["snapshot"]["status"], "closed");
    wait_kept("poll");
    wait_kept("snapshot");
    assert_eq!(
        s.thread(poll.clone()),
        rendered_poll,
        "the kept poll differs"
    );
    assert_eq!(
        s.thread(list.clone()),
        rendered_list,
        "the kept list differs"
    );

    s.thread(json!({"action": "archive", "id": "hi"}));
    assert_eq!(
        kept("poll") + kept("snapshot"),
        0,
        "archiving kept old answers"
    );
    let r = s.thread(poll);
    assert_eq!(details(&r)["snapshot"]["archived"], true);
    let r = s.thread(json!({"action": "list", "state": "closed", "visibility": "all"}));
    assert_eq!(details(&r)["threads"][0]["archived"], true);
    s.close(std::time::Duration::from_secs(20));
}

// ---- golden cases ported from pi-threads (phongndo/pi-threads, test/*.test.ts) ---------------
//
// The originals drive a mocked manager or a fake child; these drive a real serve and scripted
// children to the same states and assert the same facts. Where threadbase deliberately differs
// (docs/fidelity.md, "Contract A"), the comment says so and
// threadbase's documented behaviour is asserted.

/// The fields `names` of the object `v` (missing ones as null).
fn pick(v: &Value, names: &[&str]) -> Value {
    names
        .iter()
        .map(|k| (k.to_string(), v[*k].clone()))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// Polls `id` until `f` holds for its snapshot (at most 20 s); returns that snapshot.
fn poll_until(s: &mut Serve, id: &str, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = s.thread(json!({"action": "poll", "id": id}));
        if f(&details(&r)["snapshot"]) {
            return details(&r)["snapshot"].clone();
        }
        assert!(std::time::Instant::now() < deadline, "{what}: {r}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `list` with nothing to list: pi-threads' `formatList` text for an empty list, and the
/// list details with every count zero.
#[test]
fn an_empty_list_says_no_threads_are_managed() {
    let (w, mut s) = with_serve(SCRIPT);
    let r = s.thread(json!({"action": "list"}));
    assert_eq!(
        r["content"],
        json!([{"type": "text", "text": "No Pi threads are managed by this parent session."}])
    );
    assert_eq!(
        r["details"],
        json!({"kind": "listed", "threads": [], "snapshots": [], "count": 0, "liveCount": 0,
               "closedCount": 0, "detail": "summary"})
    );
    assert_eq!(text(&r), threadbase::contract::format::NO_THREADS);
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

/// test/thread-manager.test.ts, "records a child session before a fast-finishing child
/// closes": a child that accepts its prompt and exits at once. Returns the world and the
/// closed thread's list snapshot.
fn fast_finishing_child() -> (World, Value) {
    child_exiting_after_its_prompt(0)
}

/// A child that accepts its prompt and exits at once with `code`; the world and the closed
/// thread's list snapshot.
fn child_exiting_after_its_prompt(code: i32) -> (World, Value) {
    let w = world(json!({"turns": [[{"exit": code}]]}));
    let mut s = w.serve(&[]);
    let r = s.thread(json!({"action": "start", "prompt": "finish", "taskName": "quick"}));
    assert_eq!(details(&r)["promptAccepted"], true, "{r}");
    let snap = s.only_thread_once_closed(Duration::from_secs(20));
    w.close_all(s);
    (w, snap)
}

/// The part of that golden case threadbase meets: the closed thread's session is known, with
/// the child's session file and id.
#[test]
fn golden_fast_finishing_child_is_closed_with_its_session_known() {
    let (w, snap) = fast_finishing_child();
    let conn = rusqlite::Connection::open(&w.base.db).unwrap();
    let (file, id): (String, String) = conn
        .query_row(
            "SELECT session_file, session_id FROM threads WHERE path = '/root/quick'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        pick(&snap, &["status", "exit", "resumable"]),
        json!({"status": "closed", "exit": {"kind": "exited", "code": 0, "signal": null},
               "resumable": true})
    );
    assert_eq!(
        pick(&snap["session"], &["kind", "file", "id"]),
        json!({"kind": "known", "file": file, "id": id})
    );
}

/// The rest of it: like the original, the launch asks the child's state (`get_state`) before
/// it writes the prompt, so even a child that closes at once leaves its session's name and
/// pending count, `{kind: "known", file, id, name, pendingMessageCount: 0}`.
#[test]
fn golden_fast_finishing_child_session_has_its_name_and_pending_count() {
    let (_w, snap) = fast_finishing_child();
    let session = &snap["session"];
    assert_eq!(
        session,
        &json!({"kind": "known", "file": session["file"], "id": session["id"],
                "name": "finish", "pendingMessageCount": 0})
    );
}

/// test/thread-manager.test.ts, "classifies non-zero natural child exits as failed" (the prompt
/// is answered, then the child closes with code 1): `exit` is `{kind: "failed", message: "Child Pi process exited with code
/// 1"}`, naming only the parts of the status that are known (pi-threads' `classifyProcessExit`;
/// the signal-only and both-parts texts are pinned by `runtime::tests` and `runtime_process`).
#[test]
fn golden_fast_failing_child_is_failed_with_its_exit_code() {
    let (_w, snap) = child_exiting_after_its_prompt(1);
    assert_eq!(
        pick(&snap, &["status", "phase", "exit", "resumable"]),
        json!({"status": "closed", "phase": "failed",
               "exit": {"kind": "failed", "message": "Child Pi process exited with code 1"},
               "resumable": true})
    );
    let session = &snap["session"];
    assert_eq!(
        session,
        &json!({"kind": "known", "file": session["file"], "id": session["id"],
                "name": "finish", "pendingMessageCount": 0})
    );
}

/// `n` closed threads `/root/t_0000`, … of the manager serve made for `ses_parent` (serve must
/// have answered a request), written straight into the database.
fn seed_closed_threads(db: &Path, n: u64) {
    let store = threadbase::Store::open(db).unwrap();
    let manager: threadbase::domain::ManagerId = store
        .read()
        .unwrap()
        .sqlite()
        .query_row(
            "SELECT id FROM managers WHERE session_id = 'ses_parent' AND contract = 'thread'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let rows: Vec<_> = (0..n)
        .map(|i| common::thread(&common::tid(i), manager, &format!("/root/t_{i:04}"), false))
        .collect();
    common::add(&store, &rows);
}

/// A long list (streamed into the line a batch at a time) over sockets, as a Pi extension's
/// `child_process.spawn` gives serve its stdio: one socket pair for stdin and one for stdout
/// (a socket whose send buffer serve widened), and one socket for both (kept blocking).
#[test]
fn a_long_list_crosses_sockets_whole() {
    use std::os::fd::OwnedFd;
    const N: u64 = 600;
    for shared in [false, true] {
        let w = world(serde_json::from_str(SCRIPT).unwrap());
        let (ours_in, theirs_in) = std::os::unix::net::UnixStream::pair().unwrap();
        let (ours_out, theirs_out) = if shared {
            (ours_in.try_clone().unwrap(), theirs_in.try_clone().unwrap())
        } else {
            std::os::unix::net::UnixStream::pair().unwrap()
        };
        let mut child = w.spawn_serve(OwnedFd::from(theirs_in), OwnedFd::from(theirs_out));
        let mut writer = ours_in;
        let mut reader = std::io::BufReader::new(ours_out);
        let mut line = String::new();
        let mut list = |writer: &mut std::os::unix::net::UnixStream, id: u64| -> Value {
            write_list(writer, id);
            let r = read_reply(&mut reader, &mut line);
            assert_eq!(r["id"], id, "shared {shared}");
            r["result"].clone()
        };
        assert_eq!(details(&list(&mut writer, 1))["count"], 0);
        seed_closed_threads(&w.base.db, N);
        let r = list(&mut writer, 2);
        let d = details(&r);
        assert_eq!(d["count"].as_u64(), Some(N), "shared {shared}");
        assert_eq!(d["threads"].as_array().map(Vec::len), Some(N as usize));
        assert_eq!(d["threads"], d["snapshots"], "shared {shared}");
        // A line for each of the first 200 threads, then one that says how many more.
        assert_eq!(text(&r).lines().count(), 201, "shared {shared}");
        writer.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(child.wait().unwrap().success());
    }
}

/// serve widens its stdout pipe (to 1 MiB where the system allows it) and writes a reply of up
/// to that size from the request's task; replies asked for faster than the client reads
/// fill the pipe, and a reply that finds too little room is finished by the writer thread
/// before any later one is started: every line whole.
#[test]
fn direct_replies_that_fill_the_pipe_stay_whole() {
    const N: u64 = 250;
    let w = world(serde_json::from_str(SCRIPT).unwrap());
    let piped = std::process::Stdio::piped;
    let mut child = w.spawn_serve(piped(), piped());
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut reader = std::io::BufReader::new(stdout);
    let mut line = String::new();
    write_list(&mut stdin, 0);
    read_reply(&mut reader, &mut line);
    let pipe = rustix::pipe::fcntl_getpipe_size(reader.get_ref()).unwrap();
    let max: usize = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(pipe, max.min(1 << 20), "serve widens its stdout pipe");
    seed_closed_threads(&w.base.db, N);
    // Six lists in a row, none read yet: together well past the pipe's size.
    for id in 1..=6 {
        write_list(&mut stdin, id);
    }
    let answers: Vec<Value> = (1..=6)
        .map(|_| read_reply(&mut reader, &mut line))
        .collect();
    // Requests run concurrently, so their answers come in any order, each on a line of its own.
    let mut ids: Vec<u64> = answers.iter().map(|r| r["id"].as_u64().unwrap()).collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3, 4, 5, 6]);
    assert!(
        line.len() > 16 * 1024 && line.len() < pipe && 5 * line.len() > pipe,
        "{} byte replies are written directly, and five of them do not fit a {pipe} byte pipe",
        line.len()
    );
    for r in &answers {
        assert_eq!(details(&r["result"])["count"].as_u64(), Some(N));
        assert_eq!(r["result"], answers[0]["result"]);
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// A list longer than a batch (256 threads) is streamed into the response line a batch at a
/// time: every thread once, in list order, the list twice (`threads` and `snapshots`), a
/// content line for each of the first 200 threads, and the same answer once the rendered
/// answers are kept.
#[test]
fn a_long_list_is_spilled_whole_and_answers_the_same_each_time() {
    const N: u64 = 700;
    let (w, mut s) = with_serve(SCRIPT);
    let r = s.thread(json!({"action": "list"}));
    assert_eq!(details(&r)["count"], 0);
    seed_closed_threads(&w.base.db, N);

    let first = s.thread(json!({"action": "list"}));
    let d = details(&first);
    assert_eq!(d["kind"], "listed");
    assert_eq!(
        (d["count"].as_u64(), d["closedCount"].as_u64()),
        (Some(N), Some(N))
    );
    assert_eq!(d["liveCount"], 0);
    let ids: Vec<&str> = d["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (0..N).map(common::tid).collect();
    assert_eq!(ids, want, "every thread once, in list order");
    assert_eq!(d["threads"], d["snapshots"]);
    let lines: Vec<&str> = text(&first).lines().collect();
    assert_eq!(
        lines.len(),
        201,
        "a content line for each of the first 200 threads, then how many more"
    );
    assert!(lines[0].contains("/root/t_0000"), "{}", lines[0]);
    assert!(lines[199].contains("/root/t_0199"), "{}", lines[199]);
    assert!(
        lines[200].starts_with(&format!(
            "… and {} more not shown: this text lists the first 200 of {N} threads",
            N - 200
        )),
        "{}",
        lines[200]
    );

    // The first list rendered the answers; serve keeps them in the background. A list read
    // from the kept answers is the same answer.
    let kept = "SELECT count(*) FROM thread_snapshots WHERE view = 'snapshot'";
    let every = Duration::from_millis(50);
    let what = format!("not all {N} answers were kept");
    common::poll(Duration::from_secs(30), every, &what, || {
        (common::count(&w.base.db, kept) >= N as i64).then_some(())
    });
    let again = s.thread(json!({"action": "list"}));
    assert_eq!(again, first);
    // And a long list filtered by state reads only its rows.
    let closed = s.thread(json!({"action": "list", "state": "closed"}));
    assert_eq!(details(&closed)["threads"], d["threads"]);
    let live = s.thread(json!({"action": "list", "state": "live"}));
    assert_eq!(details(&live)["count"], 0);
    assert_eq!(
        text(&live),
        "No Pi threads are managed by this parent session."
    );
}

/// Threads belong to the session that started them: another session's exact thread id is
/// still an unknown reference (the contract's text), which now says whose thread it is and
/// how to continue that session (#28 item 3).
#[test]
fn another_sessions_thread_id_names_that_session_and_its_file() {
    let w = world(serde_json::from_str(SCRIPT).unwrap());
    let mut s = w.serve(&[]);
    let started = s.thread(json!({"action": "start", "prompt": "x", "taskName": "quick"}));
    let id = started["details"]["snapshot"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    w.close_all(s);
    let args = vec!["--session-id".into(), "ses_other".into()];
    let mut other = w.base.serve("script", args, &[]);
    let e = other.thread_error(json!({"action": "poll", "id": id}));
    assert_eq!(e["code"], "unknown_reference", "{e}");
    let text = message(&e);
    let file = w.parent_session.display().to_string();
    assert!(text.starts_with(&format!("Unknown thread reference: \"{id}\". It is /root/quick of another Pi session, ses_parent (session file {file})")), "{text}");
    assert!(text.contains(&format!("Repair: to use it, continue that session with `pi --session {file}`, or once that session has ended, resume it here by its id to adopt it; otherwise use a known path/id")), "{text}");
    // A path is this session's namespace: no other session is named for it.
    let e = other.thread_error(json!({"action": "poll", "id": "/root/quick"}));
    assert!(!message(&e).contains("another Pi session"), "{e}");
    w.close_all(other);
}
