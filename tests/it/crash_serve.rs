//! SIGKILL of a real `threadbase serve` at random moments (during starts, while children
//! stream, during stops), repeatedly, then restore — by `threadbase restore` on even rounds,
//! by the next `serve`'s own restore pass on odd rounds. Rounds: THREADBASE_CRASH_ROUNDS
//! (default 20); THREADBASE_CRASH_SEED replays a run's kill moments. Also: SIGKILL of one
//! child, and of a child's whole process group (with a grandchild), while serve lives on; and
//! SIGKILL of serve after it spawned a child but before the child's row recorded it.
//!
//! Every child is `threadbase scripted-agent` playing one known script, so the full event
//! stream of a thread is known in advance (`expected_events`). After each round:
//! - no process carrying the round's marker survives (children and their grandchildren);
//! - every thread row is closed; a contract A thread left live is `stale` with the contract's
//!   message; a contract B thread (`agent_spawn`) working at the kill is `paused` with
//!   "Interrupted by reload; send input to resume"; a contract C worker has a settled outcome;
//! - no committed event is lost: every event read from the database just before the kill is
//!   still stored unchanged unless the ring of 40 has since pushed it out, and the retained
//!   events of each thread are exactly seqs `max(1, last-39)..=last`, each equal to the
//!   script's known event at that position until a stop request or the close;
//! - the database passes `support/db_check.rs`, and the next `serve` is fully usable.

use crate::support::common::manager_spec;
use crate::support::db_check;
use crate::support::serve_client;
use threadbase::domain::{Phase, SessionId, ThreadStatus};

use std::collections::HashMap;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_client::{processes_with_env, scripted_command, Serve, ServeSpec};
use threadbase::contract::agent::PAUSED_STATUS;
use threadbase::contract::thread::STALE_MESSAGE;
use threadbase::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec, NewThread};
use threadbase::Store;

const COORD: &str = "ses_crashcoord";
const MARKER_VAR: &str = "THREADBASE_TEST_MARKER";
/// Tool steps in the streaming script: 2 events each, so a thread's stream (7 + 2 × TOOLS
/// events) outgrows the ring of 40.
const TOOLS: usize = 30;
const RING: i64 = 40;
const PROMPT: &str = "go";

struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    db: PathBuf,
    parent_session: PathBuf,
    run: String,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let root = dunce::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("sessions")).unwrap();
    std::fs::create_dir_all(root.join("work")).unwrap();
    let parent_session = root.join("sessions/parent.jsonl");
    let header = json!({"type":"session","version":3,"id":COORD,"timestamp":"2026-11-30T00:00:00.000Z","cwd":root});
    std::fs::write(&parent_session, format!("{header}\n")).unwrap();
    let tools: Vec<Value> = (0..TOOLS)
        .map(|i| json!({"tool": format!("t{i:02}"), "args": {}, "result": format!("r{i}"), "duration_ms": 15}))
        .collect();
    let mut turn = vec![json!({"text": "start", "deltas": 2})];
    turn.extend(tools);
    // The grandchild (`sleep 1000` in the child's group) outlives the child's own exit on
    // stdin EOF: only a group kill by the owner or by restore removes it.
    let stream = json!({"spawn_grandchild": true, "turns": [turn]});
    std::fs::write(root.join("stream.json"), stream.to_string()).unwrap();
    std::fs::write(
        root.join("quick.json"),
        json!({"turns": [], "default_reply": "done: {prompt}"}).to_string(),
    )
    .unwrap();
    World {
        db: root.join("db.sqlite"),
        parent_session,
        run: format!(
            "crash-serve-{}-{}",
            std::process::id(),
            threadbase::ids::random_hex(6)
        ),
        root,
        _dir: dir,
    }
}

impl World {
    fn marker(&self, round: u64) -> String {
        format!("{}-{round}", self.run)
    }

    fn serve(&self, round: u64, script: &str) -> Serve {
        Serve::start(ServeSpec {
            db: &self.db,
            args: vec![
                "--session-file".into(),
                self.parent_session.display().to_string(),
                "--session-id".into(),
                COORD.into(),
                "--cwd".into(),
                self.root.display().to_string(),
            ],
            env: vec![
                (
                    "THREADBASE_PI_COMMAND".into(),
                    scripted_command(&self.root.join(script)),
                ),
                (MARKER_VAR.into(), self.marker(round)),
                (
                    "PI_CODING_AGENT_DIR".into(),
                    self.root.join("agent").display().to_string(),
                ),
                ("PI_THREADS_MAX_THREADS".into(), "16".into()),
                ("THREADBASE_MAX_WORKERS".into(), "32".into()),
                ("PI_SUBAGENTS_MAX_THREADS".into(), "1000".into()),
            ],
            cwd: self.root.clone(),
            clear_env: false,
        })
    }

    fn conn(&self) -> crate::support::sql::Conn {
        let c = crate::support::sql::Conn::open(&self.db).unwrap();
        c.busy_timeout(Duration::from_secs(10)).unwrap();
        c
    }

    /// Waits (bounded) until no process carries the round's marker; returns the survivors.
    fn survivors(&self, round: u64) -> Vec<u32> {
        let mut left = processes_with_env(MARKER_VAR, &self.marker(round));
        for _ in 0..100 {
            if left.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            left = processes_with_env(MARKER_VAR, &self.marker(round));
        }
        left
    }
}

/// A process as a failure shows it: its pid, parent, group, state, age and command line.
fn describe(pid: u32) -> String {
    let proc = std::path::PathBuf::from(format!("/proc/{pid}"));
    let stat = std::fs::read_to_string(proc.join("stat")).unwrap_or_default();
    // After the command's closing parenthesis: state, ppid, pgrp, …, starttime (field 22).
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let cmdline = std::fs::read(proc.join("cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default();
    format!(
        "pid {pid} state {} ppid {} pgrp {} start {} ticks: {}",
        fields.first().unwrap_or(&"?"),
        fields.get(1).unwrap_or(&"?"),
        fields.get(2).unwrap_or(&"?"),
        fields.get(19).unwrap_or(&"?"),
        cmdline.trim()
    )
}

/// Usage across the crash: every assistant message of the thread's session file is counted
/// (the restore pass reads back what the dead serve never recorded) and none twice. The row may
/// hold one message more than the file: the child (the scripted agent writes each message just
/// after emitting it) was killed between the two.
fn check_usage(conn: &crate::support::sql::Conn, round: u64, id: &str) {
    let (file, turns, input): (Option<String>, i64, i64) = conn
        .query_row(
            "SELECT t.session_file, u.turns, u.input_tokens FROM threads t JOIN thread_usage u ON u.thread_id = t.id WHERE t.id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    let Some(text) = file.and_then(|f| std::fs::read_to_string(f).ok()) else {
        assert_eq!(
            turns, 0,
            "round {round}: {id} counted messages without a session file"
        );
        return;
    };
    let messages: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .map(|e| e["message"]["usage"].clone())
        .collect();
    let n = messages.len() as i64;
    assert!(
        turns == n || turns == n + 1,
        "round {round}: {id} counted {turns} messages, its session file has {n}"
    );
    if turns == n {
        let sum: i64 = messages
            .iter()
            .map(|u| u["input"].as_i64().unwrap_or(0))
            .sum();
        assert_eq!(
            input, sum,
            "round {round}: {id} input tokens vs its session file"
        );
    }
}

/// The events a streaming thread records, in order, before any stop or close (`pid` of
/// `thread_started` aside).
fn expected_events() -> Vec<(String, Value)> {
    let mut e = vec![
        ("thread_started".to_string(), Value::Null),
        ("turn_started".into(), json!({})),
        ("assistant_message".into(), json!({"text": "start"})),
    ];
    for i in 0..TOOLS {
        let name = format!("t{i:02}");
        // The call's arguments as their JSON text (the script gives none: `{}`).
        e.push((
            "tool_started".into(),
            json!({"toolName": name, "args": "{}"}),
        ));
        e.push((
            "tool_completed".into(),
            json!({"toolName": name, "error": false}),
        ));
    }
    e.push(("turn_completed".into(), json!({})));
    e.push(("turn_started".into(), json!({})));
    e.push((
        "assistant_message".into(),
        json!({"text": format!("done: {PROMPT}")}),
    ));
    e.push(("turn_completed".into(), json!({})));
    e
}

type Event = (i64, String, Value);

/// Every stored event of every thread.
fn all_events(conn: &crate::support::sql::Conn) -> HashMap<String, Vec<Event>> {
    let mut stmt = conn
        .prepare("SELECT thread_id, seq, type, data FROM thread_events ORDER BY thread_id, seq")
        .unwrap();
    let mut out: HashMap<String, Vec<Event>> = HashMap::new();
    let rows = stmt
        .query_map((), |r| {
            let data: String = r.get(3)?;
            Ok((
                r.get::<_, String>(0)?,
                (r.get(1)?, r.get(2)?, serde_json::from_str(&data).unwrap()),
            ))
        })
        .unwrap();
    for row in rows {
        let (id, ev) = row.unwrap();
        out.entry(id).or_default().push(ev);
    }
    out
}

struct Row {
    id: String,
    contract: String,
    task_name: String,
    status: String,
    exit_kind: Option<String>,
    exit_message: Option<String>,
    agent_state: Option<String>,
    status_text: Option<String>,
    outcome: Option<String>,
    last_seq: i64,
}

fn rows(conn: &crate::support::sql::Conn) -> Vec<Row> {
    let mut stmt = conn
        .prepare(
            "SELECT t.id, m.contract, t.task_name, t.status, t.exit_kind, t.exit_message, t.agent_state, t.status_text, t.outcome, t.last_seq
             FROM threads t JOIN managers m ON m.id = t.manager_id ORDER BY t.created_at",
        )
        .unwrap();
    stmt.query_map((), |r| {
        Ok(Row {
            id: r.get(0)?,
            contract: r.get(1)?,
            task_name: r.get(2)?,
            status: r.get(3)?,
            exit_kind: r.get(4)?,
            exit_message: r.get(5)?,
            agent_state: r.get(6)?,
            status_text: r.get(7)?,
            outcome: r.get(8)?,
            last_seq: r.get(9)?,
        })
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// The retained events of one streaming thread: a contiguous window ending at `last_seq`,
/// the script's known events, then only close events, or a `thread_stopping` and whatever
/// the abort makes the child emit; always ending with `thread_closed`.
fn check_stream(id: &str, last_seq: i64, events: &[Event], expected: &[(String, Value)]) {
    let first = (last_seq - RING + 1).max(1);
    let seqs: Vec<i64> = events.iter().map(|e| e.0).collect();
    assert_eq!(
        seqs,
        (first..=last_seq).collect::<Vec<_>>(),
        "{id}: retained seqs must be the window {first}..={last_seq}"
    );
    let mut tail = false;
    let mut stopping = false;
    for (seq, kind, data) in events {
        let known = expected.get(*seq as usize - 1);
        let matches = match known {
            Some((k, _)) if k == "thread_started" => kind == k && data["pid"].is_i64(),
            Some((k, d)) => kind == k && data == d,
            None => false,
        };
        if !tail && matches {
            continue;
        }
        tail = true;
        // After a stop request the abort cuts the script short (the running tool ends with
        // an error, the turn closes): any lifecycle event may follow until the close.
        stopping |= kind == "thread_stopping";
        if stopping {
            continue;
        }
        assert!(
            matches!(
                kind.as_str(),
                "thread_stopping" | "thread_closed" | "thread_error"
            ),
            "{id}: seq {seq} is {kind} {data}, expected {known:?} or a stop/close event; events: {events:#?}"
        );
    }
    assert_eq!(
        events.last().map(|e| e.1.as_str()),
        Some("thread_closed"),
        "{id}: ends closed"
    );
}

struct Snapshot {
    events: HashMap<String, Vec<Event>>,
    /// Thread ids live at the snapshot.
    live: Vec<String>,
}

fn snapshot(w: &World) -> Snapshot {
    let conn = w.conn();
    let live = rows(&conn)
        .into_iter()
        .filter(|r| r.status == "live")
        .map(|r| r.id)
        .collect();
    Snapshot {
        events: all_events(&conn),
        live,
    }
}

/// Checks the database after the restore of a killed round.
fn verify_after_restore(w: &World, round: u64, snap: &Snapshot, stopped: &[String]) {
    let left = w.survivors(round);
    assert!(
        left.is_empty(),
        "round {round}: processes survived the restore: {:?}",
        left.iter().map(|&p| describe(p)).collect::<Vec<_>>()
    );
    let conn = w.conn();
    let expected = expected_events();
    let events = all_events(&conn);
    let none = Vec::new();
    for row in rows(&conn) {
        assert_eq!(row.status, "closed", "round {round}: {} still live", row.id);
        let evs = events.get(&row.id).unwrap_or(&none);
        // Nothing committed before the kill is lost (beyond the ring).
        for ev in snap.events.get(&row.id).unwrap_or(&none) {
            if ev.0 > row.last_seq - RING {
                assert!(
                    evs.contains(ev),
                    "round {round}: {} lost committed event {ev:?}",
                    row.id
                );
            }
        }
        match row.contract.as_str() {
            "thread" if row.task_name.starts_with('r') => {
                if !evs.is_empty() {
                    check_stream(&row.id, row.last_seq, evs, &expected);
                }
                check_usage(&conn, round, &row.id);
                if snap.live.contains(&row.id) && !stopped.contains(&row.id) {
                    assert_eq!(
                        (row.exit_kind.as_deref(), row.exit_message.as_deref()),
                        (Some("stale"), Some(STALE_MESSAGE)),
                        "round {round}: {} was live at the kill",
                        row.id
                    );
                }
            }
            "agent" => {
                if !evs.is_empty() {
                    check_stream(&row.id, row.last_seq, evs, &expected);
                }
                // Working at the kill: paused and interrupted. A run that settled before the
                // kill keeps its state.
                match row.agent_state.as_deref() {
                    Some("paused") => assert_eq!(
                        row.status_text.as_deref(),
                        Some(PAUSED_STATUS),
                        "round {round}: contract B row {}",
                        row.id
                    ),
                    Some("completed") => {}
                    other => panic!("round {round}: contract B row {} is {other:?}", row.id),
                }
            }
            "worker" => {
                assert!(row.exit_kind.is_some());
                // A worker closed before its first run ended has no stored outcome; the
                // contract C views read it as failed/interrupted (frees its slot).
                assert!(
                    matches!(
                        row.outcome.as_deref(),
                        None | Some("succeeded" | "failed" | "interrupted")
                    ),
                    "round {round}: worker {} outcome {:?}",
                    row.id,
                    row.outcome
                );
            }
            _ => {}
        }
    }
    if let Err(e) = db_check::db_check(&w.db) {
        let mut stmt = conn
            .prepare("SELECT thread_id, seq, at, type, data FROM thread_events e WHERE EXISTS (SELECT 1 FROM thread_events f WHERE f.thread_id = e.thread_id AND f.seq < e.seq AND f.at > e.at) OR EXISTS (SELECT 1 FROM thread_events f WHERE f.thread_id = e.thread_id AND f.seq > e.seq AND f.at < e.at) ORDER BY thread_id, seq")
            .unwrap();
        let disorder: Vec<String> = stmt
            .query_map((), |r| {
                Ok(format!(
                    "{} {} {} {} {}",
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?
                ))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        panic!(
            "round {round}: database check failed: {e}; events out of time order: {disorder:#?}"
        );
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn run_restore_cli(w: &World) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&w.db)
        .args(["restore", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "restore failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn sigkill_of_serve_at_random_moments_loses_nothing_and_leaves_no_process() {
    let rounds: u64 = std::env::var("THREADBASE_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let seed = std::env::var("THREADBASE_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| u64::from_str_radix(&threadbase::ids::random_hex(15), 16).unwrap() | 1);
    println!("crash_serve: seed {seed} (THREADBASE_CRASH_SEED), {rounds} rounds");
    let mut rng = Rng(seed);
    let w = world();
    let started = Instant::now();
    // (round, snapshot, stopped) whose restore the next serve's start performs.
    let mut pending: Option<(u64, Snapshot, Vec<String>)> = None;
    let mut moments: HashMap<&str, u64> = HashMap::new();
    let mut stale_total = 0;
    for round in 0..rounds {
        let mut s = w.serve(round, "stream.json");
        // The first answer comes after serve's restore pass.
        let listed = s.thread(json!({"action": "list", "state": "all"}));
        assert_eq!(listed["details"]["kind"], "listed");
        if let Some((r, snap, stopped)) = pending.take() {
            verify_after_restore(&w, r, &snap, &stopped);
        }
        // A contract B thread streaming the same script.
        s.send(
            "agent_spawn",
            json!({"path": format!("b{round}"), "type": "worker", "task": PROMPT, "wait": false}),
        );
        if round % 3 == 1 {
            s.send(
                "threads_spawn",
                json!({"key": format!("w{round}"), "title": "T", "directory": w.root.join("work"), "task": PROMPT}),
            );
        }
        let starts = 1 + rng.below(3);
        for i in 0..starts {
            s.send(
                "thread",
                json!({"action": "start", "prompt": PROMPT, "taskName": format!("r{round}_{i}")}),
            );
        }
        let mut stopped = Vec::new();
        let moment = match rng.below(3) {
            0 => {
                std::thread::sleep(Duration::from_millis(rng.below(40)));
                "during starts"
            }
            1 => {
                std::thread::sleep(Duration::from_millis(100 + rng.below(1400)));
                "while streaming"
            }
            _ => {
                std::thread::sleep(Duration::from_millis(100 + rng.below(900)));
                let id: Option<String> = w
                    .conn()
                    .query_row(
                        "SELECT id FROM threads WHERE task_name = ?1",
                        [format!("r{round}_0")],
                        |r| r.get(0),
                    )
                    .ok();
                if let Some(id) = id {
                    s.send(
                        "thread",
                        json!({"action": "stop", "id": id, "force": rng.below(2) == 0}),
                    );
                    stopped.push(id);
                }
                std::thread::sleep(Duration::from_millis(rng.below(60)));
                "during a stop"
            }
        };
        *moments.entry(moment).or_default() += 1;
        let snap = snapshot(&w);
        stale_total += snap.live.len();
        s.child.kill().unwrap(); // SIGKILL
        s.child.wait().unwrap();
        drop(s);
        if round % 2 == 0 {
            let report = run_restore_cli(&w);
            assert!(report["restored"].is_array(), "{report}");
            verify_after_restore(&w, round, &snap, &stopped);
        } else {
            pending = Some((round, snap, stopped));
        }
        println!(
            "round {round}: killed {moment} after {starts} start(s), {:.1} s so far",
            started.elapsed().as_secs_f64()
        );
    }

    // The next serve restores the last round if needed, and is fully usable.
    let mut s = w.serve(rounds, "quick.json");
    s.thread(json!({"action": "list"}));
    if let Some((r, snap, stopped)) = pending.take() {
        verify_after_restore(&w, r, &snap, &stopped);
    }
    // Contract C: every worker a kill interrupted reads as settled (failed/interrupted, or
    // succeeded if its run ended first), never running or starting, so it holds no slot.
    let id = s.send("threads_list", json!({}));
    let list = s.response(id, Duration::from_secs(60));
    let workers = list["result"]["details"]["workers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    // A spawn sent just before a kill may never have reached the database.
    assert!(workers.len() as u64 <= (rounds + 1) / 3, "{list}");
    for v in &workers {
        assert!(
            matches!(
                v["outcome"].as_str(),
                Some("succeeded" | "failed" | "interrupted")
            ),
            "worker not settled after restore: {v}"
        );
    }
    let r = s.thread(json!({"action": "start", "prompt": "after", "taskName": "after"}));
    assert_eq!(r["details"]["kind"], "started");
    let r = s.thread(json!({"action": "wait", "id": "after", "timeoutMs": 30000}));
    assert_eq!(r["details"]["snapshot"]["phase"], "idle", "{r}");
    assert_eq!(
        r["details"]["snapshot"]["resultSummary"], "done: after",
        "{r}"
    );
    let r = s.thread(json!({"action": "list", "state": "live"}));
    assert_eq!(r["details"]["count"], 1, "{r}");
    assert!(s.close(Duration::from_secs(30)).success());
    let left = w.survivors(rounds);
    assert!(left.is_empty(), "after the final serve: {left:?}");
    db_check::db_check(&w.db).unwrap_or_else(|e| panic!("final check: {e}"));
    let agents: Vec<(String, i64)> = {
        let conn = w.conn();
        let mut stmt = conn
            .prepare("SELECT agent_state, count(*) FROM threads WHERE agent_state IS NOT NULL GROUP BY 1 ORDER BY 1")
            .unwrap();
        let rows = stmt.query_map((), |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        rows.map(Result::unwrap).collect()
    };
    assert!(
        agents.iter().any(|(state, _)| state == "paused"),
        "no contract B thread was interrupted: {agents:?}"
    );
    println!("crash_serve: contract B threads by state: {agents:?}");
    println!(
        "crash_serve: seed {seed}: {rounds} rounds survived ({moments:?}), {stale_total} threads live at a kill, {} workers settled, {:.1} s",
        workers.len(),
        started.elapsed().as_secs_f64()
    );
}

/// Waits until `thread` (a reference) is closed, polling through serve.
fn wait_closed(s: &mut Serve, thread: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = s.thread(json!({"action": "poll", "id": thread}));
        if r["details"]["snapshot"]["status"] == "closed" {
            return r;
        }
        assert!(Instant::now() < deadline, "{thread} never closed: {r}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Waits until the thread's row records a pid and some streamed events.
fn streaming_pid(w: &World, task: &str) -> (i64, i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let row: Option<(Option<i64>, Option<i64>, i64)> = w
            .conn()
            .query_row(
                "SELECT pid, pgid, last_seq FROM threads WHERE task_name = ?1",
                [task],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .ok();
        if let Some((Some(pid), Some(pgid), seq)) = row {
            if seq >= 4 {
                return (pid, pgid);
            }
        }
        assert!(Instant::now() < deadline, "{task} never streamed");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn exit_of(w: &World, task: &str) -> (String, Option<String>, String) {
    w.conn()
        .query_row(
            "SELECT exit_kind, exit_signal, status FROM threads WHERE task_name = ?1",
            [task],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
}

#[test]
fn sigkill_of_a_child_or_its_group_is_a_failed_exit_and_serve_lives_on() {
    let w = world();
    let mut s = w.serve(0, "stream.json");
    let t0 = Instant::now();

    // One child, SIGKILL to the child alone (its grandchild is left to the group cleanup).
    s.thread(json!({"action": "start", "prompt": PROMPT, "taskName": "victim"}));
    let (pid, _) = streaming_pid(&w, "victim");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let r = wait_closed(&mut s, "victim");
    assert_eq!(r["details"]["snapshot"]["exit"]["kind"], "failed", "{r}");
    let (kind, signal, status) = exit_of(&w, "victim");
    assert_eq!(
        (kind.as_str(), signal.as_deref(), status.as_str()),
        ("failed", Some("SIGKILL"), "closed")
    );
    println!(
        "child SIGKILL recorded after {:.2} s",
        t0.elapsed().as_secs_f64()
    );

    // The whole group: the child and its grandchild.
    s.thread(json!({"action": "start", "prompt": PROMPT, "taskName": "group"}));
    let (_, pgid) = streaming_pid(&w, "group");
    let members_before = processes_with_env(MARKER_VAR, &w.marker(0)).len();
    rustix::process::kill_process_group(
        rustix::process::Pid::from_raw(pgid as i32).unwrap(),
        rustix::process::Signal::KILL,
    )
    .unwrap();
    let r = wait_closed(&mut s, "group");
    assert_eq!(r["details"]["snapshot"]["exit"]["kind"], "failed", "{r}");
    let (kind, signal, _) = exit_of(&w, "group");
    assert_eq!(
        (kind.as_str(), signal.as_deref()),
        ("failed", Some("SIGKILL"))
    );
    println!(
        "group SIGKILL recorded after {:.2} s ({members_before} marked processes before)",
        t0.elapsed().as_secs_f64()
    );

    // serve lives on and is usable; each child's events still follow the script.
    assert!(s.child.try_wait().unwrap().is_none(), "serve died");
    s.thread(json!({"action": "start", "prompt": PROMPT, "taskName": "after"}));
    let r = s.thread(json!({"action": "wait", "id": "after", "timeoutMs": 60000}));
    assert_eq!(r["details"]["snapshot"]["phase"], "idle", "{r}");
    let r = s.thread(json!({"action": "list", "state": "all"}));
    assert_eq!(r["details"]["count"], 3, "{r}");
    assert!(s.close(Duration::from_secs(30)).success());
    let conn = w.conn();
    let events = all_events(&conn);
    for row in rows(&conn) {
        check_stream(&row.id, row.last_seq, &events[&row.id], &expected_events());
    }
    drop(conn);
    let left = w.survivors(0);
    assert!(left.is_empty(), "leftover processes: {left:?}");
    db_check::db_check(&w.db).unwrap_or_else(|e| panic!("{e}"));
    println!("child/group kills: {:.1} s", t0.elapsed().as_secs_f64());
}

/// Found by the rounds above: a child exits on its own once its owner's pipes close, so the
/// recorded pid is gone and restore used to leave the child's background processes alive.
/// Now they are killed when their environment names the thread; a process of the same group
/// without that proof is left alone.
#[test]
fn restore_kills_what_a_gone_child_left_in_its_group_and_nothing_else() {
    let w = world();
    let marker = w.marker(99);
    let id = "thread_0123456789ab";
    let mut leader = Command::new("sh")
        .args([
            "-c",
            "sleep 1000 >/dev/null 2>&1 & env -u PI_THREADS_SELF_ID sleep 1001 >/dev/null 2>&1 & echo started; exit 0",
        ])
        .env(MARKER_VAR, &marker)
        .env("PI_THREADS_SELF_ID", id)
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pgid = leader.id() as i64;
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(leader.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    leader.wait().unwrap();
    let mut owner = Command::new("true").spawn().unwrap();
    let owner_pid = owner.id() as i64;
    owner.wait().unwrap();
    let store = Store::open(&w.db).unwrap();
    store
        .write(|tx| {
            let m = upsert_manager(
                tx,
                &ManagerSpec {
                    cwd: Some("/tmp"),
                    owner_pid: Some(owner_pid),
                    owner_started_at: Some(1),
                    ..manager_spec(&SessionId::new("ses_gone"), Contract::Thread, "/root", None)
                },
            )?;
            insert_thread(
                tx,
                &NewThread {
                    id: id.into(),
                    manager_id: m,
                    path: "/root/gone".into(),
                    parent_path: Some("/root".into()),
                    task_name: "gone".into(),
                    name: "gone".into(),
                    depth: 1,
                    cwd: "/tmp".into(),
                    status: ThreadStatus::Live,
                    phase: Phase::Busy,
                    ..Default::default()
                },
            )?;
            tx.execute_script(&crate::support::sql::with(
                "UPDATE threads SET pid = ?2, pgid = ?2, process_started_at = 1, owner_pid = ?3, owner_started_at = 1 WHERE id = ?1",
                rusqlite::params![id, pgid, owner_pid]))?;
            Ok(())
        })
        .unwrap();
    assert_eq!(processes_with_env(MARKER_VAR, &marker).len(), 2);
    let report = run_restore_cli(&w);
    assert_eq!(report["restored"], json!([id]), "{report}");
    // The unproven process survives; the thread's own is gone.
    let mut left = processes_with_env(MARKER_VAR, &marker);
    for _ in 0..100 {
        if left.len() <= 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        left = processes_with_env(MARKER_VAR, &marker);
    }
    assert_eq!(left.len(), 1, "{left:?}");
    let cmd = std::fs::read_to_string(format!("/proc/{}/cmdline", left[0])).unwrap();
    assert!(cmd.contains("1001"), "{cmd:?}");
    for pid in left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
}

/// The window between a child's spawn and the row that records its pid: a serve killed there
/// must not leave a process no row names. The test holds the database's write lock from just
/// after the thread's row has its session file (`start`'s last write before the spawn), so the
/// serve cannot record the child, waits until the child has started and spawned its
/// grandchild (`sleep 1000` in its group, as a Pi extension may at startup), SIGKILLs the serve
/// and lets go of the lock. The restore pass finds both by the thread id their environment
/// carries (`process::kill_thread_leftovers`), since the row names no process group.
#[test]
fn a_serve_killed_before_it_records_a_new_child_leaves_no_process() {
    let w = world();
    let mut s = w.serve(0, "stream.json");
    s.thread(json!({"action": "list"}));
    // The test's own store, opened once, on a thread of its own. For a task it polls in
    // short write transactions (SQLite's write lock; on PostgreSQL the advisory lock every
    // write takes first) until the row has its session file, `start`'s last write before the
    // spawn; if the pid is still unrecorded then, it keeps that transaction open until told to
    // let go, and the serve cannot record the child meanwhile.
    let (ask, asks) = std::sync::mpsc::channel::<String>();
    let (answer, answers) = std::sync::mpsc::channel::<bool>();
    let (release, release_rx) = std::sync::mpsc::channel::<()>();
    let db = w.db.clone();
    let holder = std::thread::spawn(move || {
        let store = Store::open(&db).unwrap();
        for task in asks {
            let sql = format!(
                "SELECT pid FROM threads WHERE task_name = {} AND session_file IS NOT NULL",
                crate::support::sql::lit(&task)
            );
            let deadline = Instant::now() + Duration::from_secs(30);
            let held = loop {
                assert!(Instant::now() < deadline, "{task}: no session file");
                let seen = store
                    .write(|tx| {
                        let rows = tx.query_values(&sql)?.1;
                        Ok(match rows.first().and_then(|r| r.first()) {
                            None => None,
                            Some(threadbase::store::db::Value::Null) => {
                                answer.send(true).unwrap();
                                let _ = release_rx.recv();
                                Some(true)
                            }
                            Some(_) => Some(false),
                        })
                    })
                    .unwrap();
                match seen {
                    Some(held) => break held,
                    None => std::thread::sleep(Duration::from_micros(300)),
                }
            };
            if !held {
                answer.send(false).unwrap();
            }
        }
    });
    let pid_of = |task: &str| -> Option<Option<i64>> {
        w.conn()
            .query_row(
                "SELECT pid FROM threads WHERE task_name = ?1",
                [task],
                |r| r.get(0),
            )
            .ok()
    };
    // Each attempt leaves a live child; the serve allows 16.
    let mut held = None;
    for attempt in 0..14 {
        let task = format!("unrecorded_{attempt}");
        ask.send(task.clone()).unwrap();
        s.send(
            "thread",
            json!({"action": "start", "prompt": PROMPT, "taskName": task}),
        );
        if answers.recv().unwrap() {
            println!("{task}: its row held before the child was recorded");
            held = Some(task);
            break;
        }
    }
    drop(ask);
    let task = held.expect("the write lock was never taken before a child's row recorded it");
    // Its own processes, by the path their environment carries (earlier attempts' children
    // are recorded; they may live on, or be stopped when they do not answer).
    let deadline = Instant::now() + Duration::from_secs(30);
    let path = format!("/root/{task}");
    while processes_with_env("PI_THREADS_PATH", &path).len() < 2 {
        assert!(
            Instant::now() < deadline,
            "{task}: its child and grandchild never appeared"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(pid_of(&task), Some(None), "{task}: recorded under the lock");
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    drop(s);
    drop(release);
    holder.join().unwrap();
    let report = run_restore_cli(&w);
    assert!(report["restored"].is_array(), "{report}");
    let left = w.survivors(0);
    assert!(
        left.is_empty(),
        "processes outlived a serve killed before it recorded {task}'s child: {left:?}"
    );
    let (exit, _, status) = exit_of(&w, &task);
    assert_eq!(
        (status.as_str(), exit.as_str()),
        ("closed", "stale"),
        "{task}"
    );
}
