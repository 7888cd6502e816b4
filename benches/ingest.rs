//! Event ingest throughput through `events::append` inside `Store::write` (DESIGN.md target:
//! ≥ 200,000 events/s sustained).
//!
//! - `ingest/batched/256`: one write transaction per batch of 256 events, 32 to each of 8
//!   threads of one manager, as the ingest path batches child streams.
//! - `ingest/batched_usage/256`: the same batches, plus what the writer adds for usage: one
//!   `thread_usage` addition per thread per batch (the writer sums a batch's messages per
//!   thread), which moves `tree_usage` by trigger.
//! - `ingest/unbatched/1`: one event per write transaction, round-robin over the 8 threads.
//!
//! The `ingest_stream` group drives the real ingest path end to end: `Runtime::launch` of child
//! processes (bash) that replay recorded Pi 1.6 stdout lines (`benches/data/pi16_events.jsonl`,
//! recorded by `tests/it/record_pi_events.rs`) through the runtime's stdout readers, the event
//! mapping and the batching writer, until the database holds every recorded event:
//!
//! - `ingest_stream/pi16_lines/8x<n>`: 8 children, each streaming the recorded transcript
//!   repeated to about 50,000 lines; throughput in child lines (most are `message_update`
//!   deltas that end as partial text, not event rows). The run ends when every thread's
//!   `last_seq` reaches the count the mapping gives for its lines.
//! - `ingest_stream/tool_events/8x50000`: 8 children, each streaming 50,000
//!   `tool_execution_start` lines, every one a recorded event row (the event table's worst
//!   case).
//! - `ingest_stream/usage_events/8x50000`: `tool_events` with usage: every fifth line is a
//!   completed assistant message calling a tool, exactly as real Pi 1.6 wrote it in the
//!   recording (`message_end` with `usage`: an addition to `thread_usage` and, by trigger,
//!   `tree_usage`, no event row), the other four `tool_execution_start` event rows. Its rate in
//!   recorded events/s is the one to hold against the target beside `tool_events`.
//!
//! Every run also checks that each message's usage was counted exactly once.
//! - `ingest_stream/visible_idle`, `ingest_stream/visible_loaded`: one child writes a
//!   `tool_execution_start` line every 10 ms, carrying its write time; a reader polls
//!   `store.read()` and measures write → visible. `loaded` runs it while 8 more children stream
//!   the transcript in bursts of 1,000 lines with 10 ms pauses (as fast as bash manages: about
//!   150,000 lines/s on 2 cores; the rate is printed). The reported time is the mean latency;
//!   the median, p99 and max of the individual lines, and how much of it passed before the
//!   runtime read the line, are printed at the end.
//!
//! Each throughput bench also prints its median rate in lines and in recorded events, and the
//! CPU this process spent per line (all threads), which is steadier than wall time on a shared
//! machine.
//!
//! `THREADBASE_BENCH_PG=postgres://USER@HOST:PORT/DB` adds a PostgreSQL run of both groups
//! (issue 32), `ingest_pg/…` and `ingest_stream_pg/…`, each on a fresh schema of that server
//! (`bench_ingest`, `bench_ingest_stream`, dropped first) seeded like the SQLite database. The
//! README's "SQLite vs PostgreSQL" table came from
//!
//! ```text
//! THREADBASE_BENCH_PG=postgres://threadbase@127.0.0.1:41592/threadbase_test \
//!     cargo bench --bench ingest -- 'ingest(_pg)?/batched/|ingest_stream(_pg)?/(tool_events|visible_idle)'
//! ```
//!
//! Events are shaped like real compact lifecycle events (turn, tool and assistant message
//! events with their JSON data). The ring trim runs as in production: every thread is past its
//! 40 retained events after the first few batches.

mod support;

use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use serde_json::Value;
use threadbase::domain::ThreadId;
use threadbase::runtime::mapping::{Effect, Tracker};
use threadbase::runtime::{LaunchSpec, Runtime, RuntimeConfig, SendMode, StartKind};
use threadbase::store::events::{append, NewEvent};
use threadbase::Store;

/// Threads the events are spread over.
const THREADS: usize = 8;
/// Events per write transaction in the batched bench.
const BATCH: usize = 256;
/// Threads in the seeded tree the 8 event targets live in.
const TREE: usize = 10 * support::BLOCK;

/// One thread's share of a batch: a turn with tool calls and assistant messages.
fn thread_events(at: &str, per_thread: usize) -> Vec<NewEvent<'_>> {
    const PATTERN: [(&str, &str); 8] = [
        ("turn_started", "{}"),
        ("tool_started", r#"{"toolName":"bash"}"#),
        ("tool_completed", r#"{"toolName":"bash","isError":false}"#),
        (
            "assistant_message",
            r#"{"text":"I ran the test suite: 214 passed, 2 failed in store::events. Looking at the ring trim next."}"#,
        ),
        ("tool_started", r#"{"toolName":"read"}"#),
        ("tool_completed", r#"{"toolName":"read","isError":false}"#),
        (
            "assistant_message",
            r#"{"text":"The trim deletes by primary-key range, so the failing case is the off-by-one at seq 40."}"#,
        ),
        ("turn_completed", "{}"),
    ];
    (0..per_thread)
        .map(|i| {
            let (kind, data) = PATTERN[i % PATTERN.len()];
            NewEvent { at, kind, data }
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    ingest_rows(c, "ingest", support::open_db());
    if let Some(url) = support::pg_url() {
        ingest_rows(c, "ingest_pg", support::open_db_pg(&url, "bench_ingest"));
    }
}

/// The `ingest` rows on `db`, in criterion group `group`.
fn ingest_rows(c: &mut Criterion, group: &str, db: support::BenchDb) {
    support::seed_tree(&db, TREE);
    // The top-level threads of the first 8 blocks.
    let ids: Vec<ThreadId> = (0..THREADS)
        .map(|b| ThreadId::new(support::thread_id(support::top_row(b))))
        .collect();
    let at = threadbase::time::now_iso();
    let batch = thread_events(&at, BATCH / THREADS);
    let singles = thread_events(&at, 64);

    let mut g = c.benchmark_group(group);
    g.sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));

    // One transaction: the batch appended to every thread, and `spent` added to each one's
    // usage when given (as the ingest writer commits a message's usage with its events).
    let write_batch = |spent: Option<&threadbase::store::usage::Usage>| {
        db.store
            .write(|tx| {
                let mut last = 0;
                for id in &ids {
                    last = append(tx, id, black_box(&batch))?;
                    if let Some(spent) = spent {
                        threadbase::store::usage::add(tx, id, black_box(spent), &at)?;
                    }
                }
                Ok(last)
            })
            .unwrap()
    };
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function(BenchmarkId::new("batched", BATCH), |b| {
        b.iter(|| write_batch(None))
    });

    let spent = threadbase::store::usage::Usage {
        input_tokens: 10,
        output_tokens: 5,
        turns: 2,
        tool_calls: 1,
        cost_usd: 0.0001,
        ..Default::default()
    };
    g.bench_function(BenchmarkId::new("batched_usage", BATCH), |b| {
        b.iter(|| write_batch(Some(&spent)))
    });

    g.throughput(Throughput::Elements(1));
    g.bench_function(BenchmarkId::new("unbatched", 1), |b| {
        let mut i = 0usize;
        b.iter(|| {
            let id = &ids[i % THREADS];
            let event = &singles[i % singles.len()..][..1];
            i += 1;
            db.store
                .write(|tx| append(tx, id, black_box(event)))
                .unwrap()
        })
    });
    g.finish();

    // Every event went through the ring: each thread keeps exactly its newest 40 (unless a
    // filter skipped these benches).
    let conn = db.store.read().expect("reader");
    for id in &ids {
        let kept = threadbase::store::events::of_thread(&conn, id).expect("events");
        if kept.is_empty() {
            continue;
        }
        assert_eq!(
            kept.len() as i64,
            threadbase::store::events::RETAINED_EVENTS
        );
        assert!(kept.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    }
}

/// The recorded Pi 1.6 transcript.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/benches/data/pi16_events.jsonl"
);
/// Streaming children in the throughput benches.
const CHILDREN: usize = 8;
/// Lines each child streams (the transcript is repeated to at least this many).
const LINES_PER_CHILD: usize = 50_000;
/// Lines the loaded-visibility children write per burst (a burst, then a 10 ms pause).
const LOAD_BURST: usize = 1000;

/// Answers the launch's `get_state`, then waits for a prompt (the start signal, sent to every
/// child at once), answers it `started` and streams `$1`; stdout stays open afterwards.
/// `$2` = `loop` repeats `$1` forever with a 10 ms pause between repeats.
const STREAM_CHILD: &str = r#"read -r line; id=${line#*\"id\":\"}; id=${id%%\"*}
printf '{"id":"%s","type":"response","command":"get_state","success":true,"data":{"isStreaming":false,"isCompacting":false,"pendingMessageCount":0}}\n' "$id"
read -r line; id=${line#*\"id\":\"}; id=${id%%\"*}
printf '{"id":"%s","type":"response","command":"prompt","success":true,"data":{"disposition":"started"}}\n' "$id"
if [ "$2" = loop ]; then while :; do cat "$1"; read -r -t 0.01 _; done; fi
cat "$1"
exec sleep 1000"#;

/// Answers `get_state`, then writes one `tool_execution_start` every 10 ms whose tool name
/// carries a counter and the write time (`$EPOCHREALTIME`, seconds with microseconds).
const PROBE_CHILD: &str = r#"read -r line; id=${line#*\"id\":\"}; id=${id%%\"*}
printf '{"id":"%s","type":"response","command":"get_state","success":true,"data":{"isStreaming":false,"isCompacting":false,"pendingMessageCount":0}}\n' "$id"
i=0
while :; do
  i=$((i+1))
  printf '{"type":"tool_execution_start","toolCallId":"call_%d","toolName":"probe %d %s","args":{"command":"true"}}\n' "$i" "$i" "$EPOCHREALTIME"
  read -r -t 0.01 _
done"#;

/// A file of lines for the children to stream, and the events the runtime records for it.
struct StreamFile {
    path: PathBuf,
    lines: usize,
    /// `last_seq` of a thread once all of it is recorded (the launch event included).
    expected_seq: i64,
    /// `thread_usage.turns` of a thread once all of it is recorded.
    expected_turns: i64,
}

/// Lifecycle events and counted turns the runtime records for `lines` after an accepted
/// prompt.
fn recorded_events(lines: &[&str]) -> (i64, i64) {
    let mut tracker = Tracker::new();
    tracker.on_prompt_answer(
        &serde_json::json!({"success": true, "data": {"disposition": "started"}}),
    );
    let (mut events, mut turns) = (0, 0);
    for line in lines {
        let v: Value = serde_json::from_str(line).expect("fixture line is JSON");
        for e in tracker.on_event(&v) {
            match e {
                Effect::Event(..) => events += 1,
                Effect::Usage(u) => turns += u.turns,
                _ => {}
            }
        }
    }
    (events, turns)
}

/// Writes `lines` repeated until at least `min_lines` into `dir/name`.
fn stream_file(dir: &Path, name: &str, lines: &[&str], min_lines: usize) -> StreamFile {
    let repeats = min_lines.div_ceil(lines.len()).max(1);
    let all: Vec<&str> = (0..repeats).flat_map(|_| lines.iter().copied()).collect();
    let path = dir.join(name);
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("stream file"));
    for l in &all {
        f.write_all(l.as_bytes()).unwrap();
        f.write_all(b"\n").unwrap();
    }
    f.flush().unwrap();
    let (events, turns) = recorded_events(&all);
    StreamFile {
        path,
        lines: all.len(),
        expected_seq: 1 + events,
        expected_turns: turns,
    }
}

fn spec(id: &ThreadId, script: &str, args: &[&str]) -> LaunchSpec {
    let mut argv = vec![
        "bash".into(),
        "-c".into(),
        script.into(),
        "bench-child".into(),
    ];
    argv.extend(args.iter().map(|a| a.to_string()));
    LaunchSpec {
        thread_id: id.clone(),
        argv,
        cwd: std::env::temp_dir(),
        env: Vec::new(),
        clear_env: false,
        start: StartKind::Resumed,
    }
}

/// Fresh live threads (new ids every call) and their launched streaming children, waiting
/// for their start signal.
async fn launch_streamers(
    runtime: &Runtime,
    db: &support::BenchDb,
    next: &mut usize,
    n: usize,
    args: &[&str],
) -> Vec<ThreadId> {
    let mut ids = Vec::new();
    for _ in 0..n {
        let id = ThreadId::new(support::thread_id(1_000_000 + *next));
        support::insert_live_thread(
            &db.store,
            db.manager_id,
            id.as_str(),
            &format!("stream_{next}"),
        );
        *next += 1;
        runtime
            .launch(spec(&id, STREAM_CHILD, args))
            .await
            .expect("launch streamer");
        ids.push(id);
    }
    ids
}

/// Sends every child its start signal at once.
async fn start_all(runtime: &Runtime, ids: &[ThreadId]) {
    let mut starts = tokio::task::JoinSet::new();
    for id in ids {
        let rt = runtime.clone();
        let id = id.clone();
        starts.spawn(async move { rt.send(&id, SendMode::Prompt, "go").await });
    }
    while let Some(r) = starts.join_next().await {
        let outcome = r.expect("start task").expect("start send");
        assert_eq!(outcome.accepted, Some(true), "{outcome:?}");
    }
}

/// SIGKILLs every child at once.
async fn stop_all(runtime: &Runtime, ids: &[ThreadId]) {
    let mut stops = tokio::task::JoinSet::new();
    for id in ids {
        let rt = runtime.clone();
        let id = id.clone();
        stops.spawn(async move {
            rt.stop(&id, true, threadbase::runtime::StopBy::Caller)
                .await
        });
    }
    while stops.join_next().await.is_some() {}
    runtime.flush().await;
}

/// Sum over `ids` of what `sql` reads for each (its `?1`), as a reader sees it.
fn sum_over(store: &Store, ids: &[ThreadId], sql: &str) -> i64 {
    let conn = store.read().expect("reader");
    if store.is_postgres() {
        // Ad hoc SQL without parameters there: the same statement per id, ids inlined.
        return ids
            .iter()
            .map(
                |id| match pg_row(&conn, &sql.replace("?1", &format!("'{id}'")))[0] {
                    threadbase::store::db::Value::Int(v) => v,
                    ref v => panic!("{sql}: {v:?}"),
                },
            )
            .sum();
    }
    let mut stmt = conn.sqlite().unwrap().prepare_cached(sql).unwrap();
    ids.iter()
        .map(|id| stmt.query_row([id], |r| r.get::<_, i64>(0)).unwrap())
        .sum()
}

/// Sum of `last_seq` over `ids`, as a reader sees it.
fn committed(store: &Store, ids: &[ThreadId]) -> i64 {
    sum_over(store, ids, "SELECT last_seq FROM threads WHERE id = ?1")
}

/// Sum of `thread_usage.turns` over `ids`, as a reader sees it.
fn counted_turns(store: &Store, ids: &[ThreadId]) -> i64 {
    sum_over(
        store,
        ids,
        "SELECT turns FROM thread_usage WHERE thread_id = ?1",
    )
}

/// Launches `CHILDREN` streamers of `file`, starts them together and returns the time until
/// a reader sees all of their events (and checks that every message's usage was counted once:
/// it commits in the same transactions as the events).
async fn stream_once(
    runtime: &Runtime,
    db: &support::BenchDb,
    next: &mut usize,
    file: &StreamFile,
) -> (Duration, Duration) {
    let path = file.path.to_string_lossy().into_owned();
    let ids = launch_streamers(runtime, db, next, CHILDREN, &[&path]).await;
    let want = file.expected_seq * CHILDREN as i64;
    let deadline = Instant::now() + Duration::from_secs(120);
    let started = Instant::now();
    let cpu = cpu_time();
    start_all(runtime, &ids).await;
    loop {
        let seen = committed(&db.store, &ids);
        if seen >= want {
            assert_eq!(seen, want, "more events than the mapping predicts");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "stalled at {seen} of {want} events"
        );
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
    let elapsed = started.elapsed();
    let cpu = cpu_time() - cpu;
    assert_eq!(
        counted_turns(&db.store, &ids),
        file.expected_turns * CHILDREN as i64,
        "usage counted once per message"
    );
    stop_all(runtime, &ids).await;
    (elapsed, cpu)
}

/// CPU time of this process so far, all threads (user + system, from `/proc/self/stat`, in
/// clock ticks of 10 ms).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(Vec::new(), |(_, rest)| rest.split_whitespace().collect());
    // After the command: state is field 3, utime 14 and stime 15.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

/// Prints the median rate of the timed runs and the CPU this process spent per line.
fn report_runs(group: &str, label: &str, file: &StreamFile, runs: &mut [(Duration, Duration)]) {
    if runs.is_empty() {
        return;
    }
    runs.sort();
    let (wall, _) = runs[runs.len() / 2];
    let lines = (CHILDREN * file.lines) as f64;
    let events = (CHILDREN as i64 * (file.expected_seq - 1)) as f64;
    let cpu: Duration = runs.iter().map(|r| r.1).sum();
    eprintln!(
        "{group}/{label}: {} runs of {CHILDREN} children x {} lines, median {:.0} lines/s \
         ({:.0} recorded events/s), {:.2} us of CPU per line in this process",
        runs.len(),
        file.lines,
        lines / wall.as_secs_f64(),
        events / wall.as_secs_f64(),
        cpu.as_secs_f64() * 1e6 / (lines * runs.len() as f64),
    );
}

/// A child writing a timestamped `tool_execution_start` every 10 ms, and a reader thread that
/// records write → visible delays.
struct Probe {
    id: ThreadId,
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: Arc<AtomicBool>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Probe {
    async fn start(runtime: &Runtime, db: &support::BenchDb, next: &mut usize) -> Probe {
        let id = ThreadId::new(support::thread_id(1_000_000 + *next));
        support::insert_live_thread(
            &db.store,
            db.manager_id,
            id.as_str(),
            &format!("probe_{next}"),
        );
        *next += 1;
        runtime
            .launch(spec(&id, PROBE_CHILD, &[]))
            .await
            .expect("launch probe");
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (samples, stop, id) = (samples.clone(), stop.clone(), id.clone());
            let store = runtime.store().clone();
            std::thread::spawn(move || poll_probe(&store, &id, &samples, &stop))
        };
        Probe {
            id,
            samples,
            stop,
            reader: Some(reader),
        }
    }

    /// Waits for `n` more visible lines and returns the sum of their delays.
    fn wait(&self, n: usize) -> Duration {
        let from = self.samples.lock().unwrap().len();
        loop {
            {
                let s = self.samples.lock().unwrap();
                if s.len() >= from + n {
                    return s[from..from + n].iter().map(|x| x.0).sum();
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    async fn finish(mut self, runtime: &Runtime) -> Vec<Sample> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(r) = self.reader.take() {
            r.join().unwrap();
        }
        stop_all(runtime, std::slice::from_ref(&self.id)).await;
        std::mem::take(&mut *self.samples.lock().unwrap())
    }
}

/// Write → visible, and write → stamped by the runtime's reader (ms resolution).
type Sample = (Duration, Duration);

/// The one row of `sql` on a PostgreSQL reader.
fn pg_row(conn: &threadbase::store::Conn, sql: &str) -> Vec<threadbase::store::db::Value<'static>> {
    let (_, mut rows) = conn.query_values(sql).expect(sql);
    assert_eq!(rows.len(), 1, "{sql}");
    rows.remove(0)
}

fn poll_probe(store: &Store, id: &ThreadId, samples: &Mutex<Vec<Sample>>, stop: &AtomicBool) {
    use threadbase::store::db::Value as V;
    const SQL: &str = "SELECT t.last_seq, e.data, e.at FROM threads t \
             LEFT JOIN thread_events e ON e.thread_id = t.id AND e.seq = t.last_seq \
             WHERE t.id = ?1";
    let conn = store.read().expect("reader");
    let pg_sql = SQL.replace("?1", &format!("'{id}'"));
    let mut stmt = (!store.is_postgres()).then(|| conn.sqlite().unwrap().prepare(SQL).unwrap());
    let text = |v: &V<'_>| match v {
        V::Text(t) => Some(t.to_string()),
        V::Null => None,
        other => panic!("{other:?}"),
    };
    let mut last = 0i64;
    while !stop.load(Ordering::SeqCst) {
        let (seq, data, at): (i64, Option<String>, Option<String>) = match stmt.as_mut() {
            Some(stmt) => stmt
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap(),
            None => {
                let row = pg_row(&conn, &pg_sql);
                let V::Int(seq) = row[0] else {
                    panic!("{row:?}")
                };
                (seq, text(&row[1]), text(&row[2]))
            }
        };
        if seq != last {
            last = seq;
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
            let written = data
                .and_then(|d| serde_json::from_str::<Value>(&d).ok())
                .and_then(|v| {
                    let name = v["toolName"].as_str()?.to_string();
                    name.strip_prefix("probe ")?
                        .split(' ')
                        .nth(1)?
                        .parse::<f64>()
                        .ok()
                });
            if let Some(written) = written {
                let written = Duration::from_secs_f64(written);
                // `at` is stamped (in ms) when the runtime has read and mapped the line.
                let read = at
                    .and_then(|at| threadbase::time::ms_from_iso(&at))
                    .map(|ms| Duration::from_millis(ms as u64).saturating_sub(written))
                    .unwrap_or_default();
                samples
                    .lock()
                    .unwrap()
                    .push((now.saturating_sub(written), read));
            }
        }
        std::thread::sleep(Duration::from_micros(250));
    }
}

fn report_latency(group: &str, label: &str, samples: Vec<Sample>) {
    if samples.is_empty() {
        return;
    }
    let stats = |mut v: Vec<Duration>| {
        v.sort();
        let pct = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1e3;
        (pct(0.5), pct(0.99), pct(1.0))
    };
    let total = stats(samples.iter().map(|s| s.0).collect());
    let read = stats(samples.iter().map(|s| s.1).collect());
    eprintln!(
        "{group}/{label}: write -> visible over {} lines: median {:.2} ms, p99 {:.2} ms, \
         max {:.2} ms (of which write -> read by the runtime: median {:.1} ms, p99 {:.1} ms, \
         max {:.1} ms)",
        samples.len(),
        total.0,
        total.1,
        total.2,
        read.0,
        read.1,
        read.2,
    );
}

fn stream_benches(c: &mut Criterion) {
    stream_rows(c, "ingest_stream", support::open_db());
    if let Some(url) = support::pg_url() {
        stream_rows(
            c,
            "ingest_stream_pg",
            support::open_db_pg(&url, "bench_ingest_stream"),
        );
    }
}

/// The `ingest_stream` rows on `db`, in criterion group `group`.
fn stream_rows(c: &mut Criterion, group: &str, db: support::BenchDb) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    support::seed_tree(&db, TREE);
    let dir = tempfile::Builder::new()
        .prefix("threadbase-bench-stream-")
        .tempdir()
        .expect("temp dir");
    let fixture = std::fs::read_to_string(FIXTURE).expect("read benches/data/pi16_events.jsonl");
    let lines: Vec<&str> = fixture.lines().filter(|l| !l.trim().is_empty()).collect();
    let transcript = stream_file(dir.path(), "transcript.jsonl", &lines, LINES_PER_CHILD);
    let tool_line = r#"{"type":"tool_execution_start","toolCallId":"call_1","toolName":"bash","args":{"command":"cargo test --test store"}}"#;
    let tools = stream_file(dir.path(), "tools.jsonl", &[tool_line], LINES_PER_CHILD);
    // A completed assistant message calling a tool, as real Pi 1.6 wrote it in the recording.
    let message_line = lines
        .iter()
        .copied()
        .find(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_default();
            v["type"] == "message_end"
                && v["message"]["role"] == "assistant"
                && v["message"]["content"][0]["type"] == "toolCall"
                && v["message"]["usage"]["input"].is_number()
        })
        .expect("the recording has a tool call message with usage");
    let mixed = [message_line, tool_line, tool_line, tool_line, tool_line];
    let usage = stream_file(dir.path(), "usage.jsonl", &mixed, LINES_PER_CHILD);
    let burst: Vec<&str> = lines.iter().copied().cycle().take(LOAD_BURST).collect();
    let burst = stream_file(dir.path(), "burst.jsonl", &burst, LOAD_BURST);
    eprintln!(
        "ingest_stream: transcript of {} recorded lines -> {} lines per child, {} events recorded per child, {} messages counted per child",
        lines.len(),
        transcript.lines,
        transcript.expected_seq - 1,
        transcript.expected_turns
    );

    // The runtime gets its own handle on the bench database (the seeded tree included).
    let store = Arc::new(Store::open(&db.location).expect("open store"));
    let runtime = rt.block_on(async { Runtime::new(store, RuntimeConfig::default()) });
    let mut next = 0usize;

    let mut g = c.benchmark_group(group);
    g.sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(10));
    for (name, file) in [
        ("pi16_lines", &transcript),
        ("tool_events", &tools),
        ("usage_events", &usage),
    ] {
        let mut runs = Vec::new();
        g.throughput(Throughput::Elements((CHILDREN * file.lines) as u64));
        g.bench_function(
            BenchmarkId::new(name, format!("{CHILDREN}x{}", file.lines)),
            |b| {
                b.iter_custom(|iters| {
                    rt.block_on(async {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            let run = stream_once(&runtime, &db, &mut next, file).await;
                            total += run.0;
                            runs.push(run);
                        }
                        total
                    })
                })
            },
        );
        report_runs(group, name, file, &mut runs);
    }

    g.throughput(Throughput::Elements(1));
    g.sampling_mode(SamplingMode::Auto)
        .measurement_time(Duration::from_secs(2));
    // Set up on the first call: criterion calls a routine once per sample, and never when a
    // filter skips it.
    let mut idle: Option<Probe> = None;
    g.bench_function("visible_idle", |b| {
        let probe = idle.get_or_insert_with(|| rt.block_on(Probe::start(&runtime, &db, &mut next)));
        b.iter_custom(|iters| probe.wait(iters as usize))
    });
    let idle = idle.map(|probe| rt.block_on(probe.finish(&runtime)));

    let burst_path = burst.path.to_string_lossy().into_owned();
    let mut loaded: Option<(Vec<ThreadId>, Probe, i64, Instant)> = None;
    g.bench_function("visible_loaded", |b| {
        let (_, probe, _, _) = loaded.get_or_insert_with(|| {
            rt.block_on(async {
                let ids =
                    launch_streamers(&runtime, &db, &mut next, CHILDREN, &[&burst_path, "loop"])
                        .await;
                start_all(&runtime, &ids).await;
                let probe = Probe::start(&runtime, &db, &mut next).await;
                let before = committed(runtime.store(), &ids);
                (ids, probe, before, Instant::now())
            })
        });
        b.iter_custom(|iters| probe.wait(iters as usize))
    });
    let loaded = loaded.map(|(ids, probe, before, t0)| {
        let events = committed(runtime.store(), &ids) - before;
        let secs = t0.elapsed().as_secs_f64();
        let per_line = (burst.expected_seq - 1) as f64 / burst.lines as f64;
        eprintln!(
            "{group}/visible_loaded: background load {:.0} events/s recorded, about {:.0} child lines/s",
            events as f64 / secs,
            events as f64 / secs / per_line
        );
        rt.block_on(async {
            let samples = probe.finish(&runtime).await;
            stop_all(&runtime, &ids).await;
            samples
        })
    });
    g.finish();
    if let Some(samples) = idle {
        report_latency(group, "visible_idle", samples);
    }
    if let Some(samples) = loaded {
        report_latency(group, "visible_loaded", samples);
    }
    rt.block_on(runtime.shutdown());
}

criterion_group!(ingest_benches, benches, stream_benches);
criterion_main!(ingest_benches);
