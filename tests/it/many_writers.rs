//! Many writers on one database (a SQLite file; a fresh schema on the PostgreSQL pass of
//! `postgres::suite`): eight real `threadbase serve` processes (one session
//! each) start, send to, wait on, list, poll and stop their own scripted-agent children, while a
//! reader loop runs `threadbase top`'s queries and `threadbase sql` processes count events.
//!
//! Asserted: no `database is locked` / `SQLITE_BUSY` anywhere (responses, every process's
//! stderr), no lost rows (every started thread exists under its own manager, and the events each
//! serve reported are exactly the stored ones), `threadbase check` passes, and SQLite's WAL file
//! stays bounded. Times are printed (run with `--nocapture`), never asserted.
//!
//! Halfway through, every serve is replaced by a new one for the same session (its restore pass
//! then runs while the other serves launch children); no thread may be restored as stale.
//!
//! `THREADBASE_WRITERS_OPS=N` sets the operations per writer (default 120, i.e. 15 rounds of 8).

use crate::support::serve_client;
#[allow(unused_imports)]
use crate::support::sql::Rusqlite as _;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_client::{processes_with_env, scripted_command, Serve, ServeSpec};

const WRITERS: usize = 8;
const OPS_PER_ROUND: usize = 8;
/// The WAL may not grow past this. SQLite checkpoints passively from 1000 pages (about 4 MiB
/// with 4 KiB pages), but the WAL starts over only in a moment when no reader holds an old
/// snapshot, which a loaded machine can fail to give for a while (10.3 MiB in one CI run); the
/// store's writer then runs a RESTART checkpoint from 1536 pages (`src/store/wal.rs`), so the
/// WAL stays near 6 MiB. A WAL that never checkpoints grows with the load instead.
const WAL_BOUND: u64 = 8 * 1024 * 1024;

const SCRIPT: &str = r#"{"turns": [{"steps": [
    {"tool": "bash", "args": {"command": "ls"}, "result": "a\nb\nc", "duration_ms": 5},
    {"text": "done with {prompt}", "deltas": 3}
]}]}"#;

fn is_lock_error(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("database is locked")
        || t.contains("sqlite_busy")
        || t.contains("database table is locked")
        || t.contains("stayed busy")
}

#[derive(Default)]
struct Timings(BTreeMap<&'static str, Vec<Duration>>);

impl Timings {
    fn add(&mut self, op: &'static str, d: Duration) {
        self.0.entry(op).or_default().push(d);
    }
    fn merge(&mut self, other: Timings) {
        for (k, mut v) in other.0 {
            self.0.entry(k).or_default().append(&mut v);
        }
    }
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// What one writer saw: threads it started and the events its serve reported for each.
struct WriterReport {
    session: String,
    started: Vec<String>,
    /// thread id → (seq, at, type) of every retained event, from `poll` at detail full after stop.
    events: BTreeMap<String, Vec<(i64, String, String)>>,
    errors: Vec<String>,
    timings: Timings,
    stderr: String,
    exit_ok: bool,
}

fn call(s: &mut Serve, params: Value, errors: &mut Vec<String>) -> Value {
    let id = s.send("thread", params.clone());
    let r = s.response(id, Duration::from_secs(120));
    if let Some(e) = r.get("error") {
        errors.push(format!("{params} → {e}"));
    }
    r
}

fn writer(
    db: PathBuf,
    dir: PathBuf,
    marker: String,
    i: usize,
    rounds: usize,
    ops: Arc<AtomicU64>,
) -> WriterReport {
    let session = format!("ses_writer_{i}");
    let start_serve = || {
        Serve::start(ServeSpec {
            db: &db,
            args: vec![
                "--session-id".into(),
                session.clone(),
                "--cwd".into(),
                dir.display().to_string(),
            ],
            env: vec![
                (
                    "THREADBASE_PI_COMMAND".into(),
                    scripted_command(&dir.join("script.json")),
                ),
                ("THREADBASE_TEST_MARKER".into(), marker.clone()),
                (
                    "PI_CODING_AGENT_DIR".into(),
                    dir.join("agent").display().to_string(),
                ),
            ],
            cwd: dir.clone(),
            clear_env: false,
        })
    };
    let mut s = start_serve();
    let mut rep = WriterReport {
        session: session.clone(),
        started: Vec::new(),
        events: BTreeMap::new(),
        errors: Vec::new(),
        timings: Timings::default(),
        stderr: String::new(),
        exit_ok: false,
    };
    let timed = |s: &mut Serve, op: &'static str, params: Value, rep: &mut WriterReport| {
        let t = Instant::now();
        let r = call(s, params, &mut rep.errors);
        rep.timings.add(op, t.elapsed());
        ops.fetch_add(1, Ordering::Relaxed);
        r
    };
    let mut stderr = String::new();
    for round in 0..rounds {
        if round == rounds / 2 && rounds > 1 {
            // Halfway, this session's serve is replaced (as when Pi reloads): the new one runs
            // the restore pass while the other serves are launching children.
            let status = s.close(Duration::from_secs(60));
            stderr.push_str(&String::from_utf8_lossy(&s.stderr.lock().unwrap()));
            if !status.success() {
                rep.errors
                    .push(format!("serve exited with {status:?} at the restart"));
            }
            s = start_serve();
        }
        let task = format!("w{i}_r{round}");
        let r = timed(
            &mut s,
            "start",
            json!({"action": "start", "prompt": format!("job {round} of writer {i}"), "taskName": task}),
            &mut rep,
        );
        let Some(id) = r["result"]["details"]["snapshot"]["id"].as_str() else {
            continue;
        };
        let id = id.to_string();
        rep.started.push(id.clone());
        timed(
            &mut s,
            "wait",
            json!({"action": "wait", "id": id, "timeoutMs": 60000}),
            &mut rep,
        );
        timed(
            &mut s,
            "send",
            json!({"action": "send", "id": id, "message": format!("more {round}")}),
            &mut rep,
        );
        timed(
            &mut s,
            "wait",
            json!({"action": "wait", "id": id, "timeoutMs": 60000}),
            &mut rep,
        );
        timed(&mut s, "list", json!({"action": "list"}), &mut rep);
        timed(
            &mut s,
            "poll",
            json!({"action": "poll", "id": id, "detail": "tail"}),
            &mut rep,
        );
        timed(
            &mut s,
            "stop",
            json!({"action": "stop", "id": id}),
            &mut rep,
        );
        let r = timed(
            &mut s,
            "poll",
            json!({"action": "poll", "id": id, "detail": "full"}),
            &mut rep,
        );
        let snap = &r["result"]["details"]["snapshot"];
        if snap["status"] != "closed" {
            rep.errors
                .push(format!("{id} not closed after stop: {snap}"));
        }
        let evs = snap["recentEvents"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| {
                        (
                            e["seq"].as_i64().unwrap_or(-1),
                            e["at"].as_str().unwrap_or("").to_string(),
                            e["type"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        rep.events.insert(id, evs);
    }
    let status = s.close(Duration::from_secs(60));
    rep.exit_ok = status.success();
    stderr.push_str(&String::from_utf8_lossy(&s.stderr.lock().unwrap()));
    rep.stderr = stderr;
    rep
}

/// `threadbase top`'s reads: the thread list when the change counter moves, then the `poll`
/// projection inputs (row, output, events, usage) of a few threads.
fn top_reader(db: &Path, stop: &AtomicBool) -> (u64, Vec<String>) {
    let conn = threadbase::store::open_read_only(db).expect("reader open");
    let (mut iterations, mut errors) = (0u64, Vec::new());
    let mut seen = -1i64;
    while !stop.load(Ordering::Relaxed) {
        let result = (|| -> Result<(), Box<dyn std::error::Error>> {
            // PRAGMA data_version on SQLite, the LISTEN connection's count on PostgreSQL.
            let version: i64 = conn.data_version()?;
            if version == seen {
                return Ok(());
            }
            seen = version;
            // `top`'s own reads (store::top, store::facts), on either backend.
            let rows = threadbase::store::top::rows(&conn, "")?;
            for row in rows.iter().rev().take(4) {
                threadbase::store::facts::of_thread(
                    &conn,
                    &threadbase::domain::ThreadId::new(&row.id),
                )?;
            }
            Ok(())
        })();
        if let Err(e) = result {
            errors.push(e.to_string());
        }
        iterations += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
    (iterations, errors)
}

/// Repeated `threadbase sql` processes.
fn sql_counter(db: &Path, stop: &AtomicBool) -> (u64, Vec<String>, Vec<Duration>) {
    let (mut runs, mut errors, mut times) = (0u64, Vec::new(), Vec::new());
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(db)
            .args(["sql", "SELECT count(*) FROM thread_events"])
            .env_remove("THREADBASE_DB")
            .output()
            .expect("run threadbase sql");
        times.push(t.elapsed());
        runs += 1;
        if !out.status.success() || !out.stderr.is_empty() {
            errors.push(format!(
                "{:?}: {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    (runs, errors, times)
}

#[test]
fn eight_serves_write_one_database_while_readers_read() {
    let ops_per_writer: usize = std::env::var("THREADBASE_WRITERS_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120);
    let rounds = ops_per_writer.div_ceil(OPS_PER_ROUND).max(1);
    // A SQLite file, or a fresh schema on the PostgreSQL pass (postgres::suite).
    let temp = crate::support::common::temp_db();
    let dir = &temp.dir;
    std::fs::write(dir.path().join("script.json"), SCRIPT).unwrap();
    let db = temp.path.clone();
    drop(threadbase::Store::open(&db).unwrap());
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    let marker = format!("many-writers-{}", std::process::id());

    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let max_wal = Arc::new(AtomicU64::new(0));
    let wal_samples = Arc::new(Mutex::new(Vec::<(Duration, u64)>::new()));
    let began = Instant::now();

    let sampler = {
        let (stop, max_wal, samples, wal) = (
            stop.clone(),
            max_wal.clone(),
            wal_samples.clone(),
            wal.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let size = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
                max_wal.fetch_max(size, Ordering::Relaxed);
                samples.lock().unwrap().push((began.elapsed(), size));
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let reader = {
        let (stop, db) = (stop.clone(), db.clone());
        std::thread::spawn(move || top_reader(&db, &stop))
    };
    let counter = {
        let (stop, db) = (stop.clone(), db.clone());
        std::thread::spawn(move || sql_counter(&db, &stop))
    };
    let writers: Vec<_> = (0..WRITERS)
        .map(|i| {
            let (db, dir, marker, ops) = (
                db.clone(),
                dir.path().to_path_buf(),
                marker.clone(),
                ops.clone(),
            );
            std::thread::spawn(move || writer(db, dir, marker, i, rounds, ops))
        })
        .collect();
    let reports: Vec<WriterReport> = writers.into_iter().map(|h| h.join().unwrap()).collect();
    let elapsed = began.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (reads, read_errors) = reader.join().unwrap();
    let (sql_runs, sql_errors, sql_times) = counter.join().unwrap();
    sampler.join().unwrap();

    // Figures.
    let total_ops = ops.load(Ordering::Relaxed);
    let mut all = Timings::default();
    for r in &reports {
        all.merge(Timings(r.timings.0.clone()));
    }
    println!(
        "many_writers: {WRITERS} serves × {rounds} rounds: {total_ops} operations in {:.2} s = {:.1} ops/s",
        elapsed.as_secs_f64(),
        total_ops as f64 / elapsed.as_secs_f64()
    );
    for (op, times) in &mut all.0 {
        times.sort();
        println!(
            "  {op:<6} n={:<4} median {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms",
            times.len(),
            pct(times, 0.5).as_secs_f64() * 1e3,
            pct(times, 0.99).as_secs_f64() * 1e3,
            times.last().unwrap().as_secs_f64() * 1e3
        );
    }
    let mut sql_sorted = sql_times.clone();
    sql_sorted.sort();
    if !sql_sorted.is_empty() {
        println!(
            "  `threadbase sql` processes: {sql_runs}, median {:.2} ms, p99 {:.2} ms; top-style reader passes: {reads}",
            pct(&sql_sorted, 0.5).as_secs_f64() * 1e3,
            pct(&sql_sorted, 0.99).as_secs_f64() * 1e3
        );
    }
    let samples = wal_samples.lock().unwrap();
    let max_wal = max_wal.load(Ordering::Relaxed);
    println!(
        "  WAL: max {:.2} MiB over {} samples (bound {} MiB); final {} bytes",
        max_wal as f64 / 1048576.0,
        samples.len(),
        WAL_BOUND / 1048576,
        samples.last().map_or(0, |s| s.1)
    );

    // No lock errors anywhere, and no other failures either.
    for r in &reports {
        assert!(
            !is_lock_error(&r.stderr),
            "{}: lock error on stderr: {}",
            r.session,
            r.stderr
        );
        assert!(
            !r.stderr.contains("panicked"),
            "{}: {}",
            r.session,
            r.stderr
        );
        assert!(
            r.errors.iter().all(|e| !is_lock_error(e)),
            "{}: {:?}",
            r.session,
            r.errors
        );
        assert!(
            r.errors.is_empty(),
            "{}: failed requests: {:#?}",
            r.session,
            r.errors
        );
        assert!(r.exit_ok, "{} exited badly: {}", r.session, r.stderr);
        assert_eq!(r.started.len(), rounds, "{}", r.session);
    }
    assert!(read_errors.is_empty(), "reader: {read_errors:?}");
    assert!(sql_errors.is_empty(), "threadbase sql: {sql_errors:?}");

    // No lost rows: every thread under its own manager, closed, with exactly the events its
    // serve reported, and last_seq at the last of them.
    let conn = crate::support::sql::Conn::open(&db).unwrap();
    let mut started = 0;
    for r in &reports {
        for id in &r.started {
            started += 1;
            let (session, status, last_seq): (String, String, i64) = conn
                .query_row(
                    "SELECT m.session_id, t.status, t.last_seq FROM threads t JOIN managers m ON m.id = t.manager_id WHERE t.id = ?1",
                    [id],
                    |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
                )
                .unwrap_or_else(|e| panic!("{id} of {} is missing: {e}", r.session));
            assert_eq!(session, r.session, "{id}");
            assert_eq!(status, "closed", "{id}");
            let stored: Vec<(i64, String, String)> = conn
                .prepare(
                    "SELECT seq, at, type FROM thread_events WHERE thread_id = ?1 ORDER BY seq",
                )
                .unwrap()
                .query_map([id], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            assert_eq!(
                &stored, &r.events[id],
                "{id}: stored events differ from the reported ones"
            );
            assert_eq!(stored.last().map(|e| e.0), Some(last_seq), "{id}");
        }
    }
    // No thread was ever taken for orphaned: a restore pass run by a restarting serve leaves
    // the other serves' threads, including those whose launch is in flight, alone.
    let stale: i64 = conn
        .query_row(
            &format!(
                "SELECT (SELECT count(*) FROM threads WHERE exit_kind = 'stale') + (SELECT count(*) FROM thread_events WHERE type = 'thread_closed' AND {} = 'stale')",
                match crate::support::database_is_sqlite(&db) {
                    true => "json_extract(data, '$.exit.kind')",
                    false => "data->'exit'->>'kind'",
                }
            ),
            (),
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stale, 0, "a live serve's thread was restored as stale");
    let threads: i64 = conn
        .query_row("SELECT count(*) FROM threads", (), |r| r.get(0))
        .unwrap();
    assert_eq!(threads, started as i64, "exactly the started threads exist");
    let events: i64 = conn
        .query_row("SELECT count(*) FROM thread_events", (), |r| r.get(0))
        .unwrap();
    println!("  rows: {threads} threads, {events} events, {WRITERS} managers");
    drop(conn);

    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&db)
        .args(["check", "--json"])
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    println!(
        "  check: exit {:?}, {} problem(s)",
        out.status.code(),
        doc["problems"].as_array().map_or(0, Vec::len)
    );
    assert_eq!(out.status.code(), Some(0), "{doc:#}");
    assert!(
        max_wal < WAL_BOUND,
        "the WAL grew to {max_wal} bytes (bound {WAL_BOUND})"
    );
    assert!(processes_with_env("THREADBASE_TEST_MARKER", &marker).is_empty());
}
