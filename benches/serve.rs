//! What a tool call pays through `threadbase serve` (DESIGN.md "Targets", issue 12): a real
//! `serve` process (the release binary cargo builds for benches) driven over its stdin/stdout
//! pipes. Each sample writes one request line and reads until its response line, so a figure
//! covers the pipe hops, parsing, the store and serialization, as a Pi extension sees them.
//!
//! # The stored tree
//!
//! `n` closed contract A threads of one manager, in blocks of [`BLOCK`]: a depth-3 tree with
//! fan-out 10,
//!
//! ```text
//! /root/task_<b>                         top-level: 10 children, 110 descendants
//! /root/task_<b>/<word j>                j = 0..9: 10 children each (names repeat per block)
//! /root/task_<b>/<word j>/<word j>_<b>_<k>   k = 0..9: leaves with unique names
//! ```
//!
//! each with the 9 events a run with one tool call records (started, two turns, the tool, the
//! answer, closed) and a 600-character answer in `thread_output`. The rows are written straight
//! into the SQLite file in one transaction of prepared inserts, so 1M threads take a minute or
//! two, not hours of real runs. Beside the tree: 100 contract B threads (`agent_status`) and 100
//! contract C workers of 100 coordinators (`threads.snapshot`), cloned from one real
//! `agent_spawn` and one real `threads_spawn` made through `serve` while seeding, and, at every
//! run, 8 live `threadbase scripted-agent` children started through the serve being measured
//! (`PI_THREADS_MAX_THREADS` is 8).
//!
//! A seeded database is kept in `target/serve-bench/<n>/` (or `$THREADBASE_BENCH_DIR/<n>/`) and
//! reused by later runs while its `seeded` marker names the current fixture version; each run
//! first deletes the live threads an earlier run started. Delete the folder to seed again.
//!
//! # Rows
//!
//! `serve/poll_{id,path,relative,name}/<n>` (16 leaves spread over the tree, cycled),
//! `serve/list_parent_10/<n>`, `serve/list_ancestor_110/<n>`, `serve/list_live_8/<n>`,
//! `serve/list_all/<n>` (every stored thread; few samples), `serve/agent_status_100/<n>`,
//! `serve/snapshot_100/<n>`, `serve/start_first_event/<n>` (see [`first_event_row`]), and
//! `serve/floor_unknown_method/<n>` (an unknown method: the
//! request loop's own cost, a line in and an error line out, no store access), and
//! `serve/floor_echo_list_{parent,ancestor}_bytes/<n>` (not serve: this bench's own program
//! answering every line with a line as long as list `parent`'s or `ancestor`'s, the pipes' and
//! wake-ups' share of those rows). Then what the Pi model pays for the same requests: the
//! extension's tool call in Node, `extension/{poll_id,list_parent_10,list_ancestor_110,
//! list_all,first_call}/<n>` (see [`extension_rows`]). Criterion's
//! figure for a row is a mean (each sample times a batch of requests); after it, each row also
//! times requests one at a time and prints their median and 90th percentile (written to
//! `target/criterion/serve_latency/<row>/<n>.json`). Memory is not a time, so it is printed and written to
//! `target/criterion/serve_memory/<n>.json`: `VmRSS` of the idle serve (started, 8 live
//! children, each request answered once, then a pause), `VmRSS` after the timed rows and again after a pause
//! (`threadbase::store::IDLE_AFTER`, when serve cuts its page cache back), and `VmHWM` across one
//! list of all (reset through `/proc/<pid>/clear_refs`).
//!
//! # Knobs
//!
//! - `THREADBASE_BENCH_PIN=same|split` runs this client and the measured serve on one CPU, or
//!   on two (see `Placement`); unset, the scheduler places them.
//! - `THREADBASE_BENCH_SIZES=100,1k` picks tree sizes (default `100,1k,10k,100k,1M`).
//! - `THREADBASE_BENCH_LIST_ALL_MAX=10k` is the largest size whose list of all is measured
//!   (default `100k`; the issue's table skips 1M).
//! - `THREADBASE_BENCH_DIR=DIR` moves the seeded databases.
//! - `THREADBASE_BENCH_BIN=PATH` measures another build of `threadbase` (say, the base
//!   branch's, for a before/after ratio). A build with other migrations upgrades the databases
//!   it opens, so give it its own `THREADBASE_BENCH_DIR`.
//! - `THREADBASE_BENCH_PG=postgres://USER@HOST:PORT/DB` adds a PostgreSQL run (issue 32): after
//!   the SQLite rows of size `n`, the seeded file's rows are copied into a fresh schema
//!   `bench_<n>` on that server (dropped first; see [`copy_to_postgres`]; the user must be
//!   allowed `SET session_replication_role`, a superuser) and the same serve rows run against
//!   `serve --db <url>?options=-csearch_path%3Dbench_<n>`, named `serve_pg/<row>/<n>` (per-request
//!   figures in `target/criterion/serve_pg_latency/`, memory in `serve_pg_memory/`). The
//!   extension rows stay SQLite only. The README's "SQLite vs PostgreSQL" table came from
//!
//!   ```text
//!   THREADBASE_BENCH_PG=postgres://threadbase@127.0.0.1:41592/threadbase_test \
//!   THREADBASE_BENCH_SIZES=10k THREADBASE_BENCH_LIST_ALL_MAX=10k cargo bench --bench serve -- \
//!       'serve(_pg)?/(poll_id|list_parent_10|list_all)/' --warm-up-time 1 --measurement-time 3
//!   ```

#[path = "../tests/it/support/extension_driver.rs"]
mod extension_driver;
#[path = "../tests/it/support/serve_env.rs"]
mod serve_env;
mod support;

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, BenchmarkGroup, BenchmarkId, Criterion};
use rusqlite::{params, Connection};
use serde_json::{json, Value};

/// Threads per block: one top-level thread, 10 children, 100 grandchildren.
const BLOCK: usize = 111;
const FANOUT: usize = 10;
const WORDS: [&str; FANOUT] = [
    "plan", "impl", "tests", "review", "docs", "lint", "bench", "fix", "refactor", "deploy",
];
/// Distinct targets each row cycles through.
const TARGETS: usize = 16;
/// Live scripted children started through the measured serve.
const LIVE: usize = 8;
/// Contract B threads and contract C workers seeded beside the tree.
const SIDE: usize = 100;
const SESSION_ID: &str = "bench-session";
const DEFAULT_SIZES: &str = "100,1k,10k,100k,1M";
/// Bump when the seeded rows change, so cached databases are seeded again.
const FIXTURE_VERSION: &str = "serve-fixture-2";
/// The binary measured: `$THREADBASE_BENCH_BIN` (another build, to compare), else the release
/// build cargo made for this bench.
fn bin() -> String {
    std::env::var("THREADBASE_BENCH_BIN")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_threadbase").to_string())
}

// ---- sizes and knobs ------------------------------------------------------------------------

fn parse_size(text: &str) -> usize {
    let t = text.trim().replace('_', "");
    let (digits, scale) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 1_000),
        Some((i, 'm' | 'M')) => (&t[..i], 1_000_000),
        _ => (&t[..], 1),
    };
    let n = digits
        .parse::<usize>()
        .unwrap_or_else(|_| panic!("bad tree size {text:?} (expected e.g. 100, 1k, 1M)"));
    assert!(
        n * scale >= BLOCK - 11,
        "tree size {text:?}: at least 100 threads"
    );
    n * scale
}

fn sizes() -> Vec<usize> {
    let text = std::env::var("THREADBASE_BENCH_SIZES")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_SIZES.to_string());
    text.split(',').map(parse_size).collect()
}

fn list_all_max() -> usize {
    std::env::var("THREADBASE_BENCH_LIST_ALL_MAX")
        .ok()
        .filter(|t| !t.trim().is_empty())
        .map_or(100_000, |t| parse_size(&t))
}

fn bench_root() -> PathBuf {
    match std::env::var_os("THREADBASE_BENCH_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/serve-bench"),
    }
}

// ---- the tree's shape -----------------------------------------------------------------------

fn top_name(b: usize) -> String {
    format!("task_{b:06}")
}

fn top_path(b: usize) -> String {
    format!("/root/{}", top_name(b))
}

fn leaf_name(b: usize, j: usize, k: usize) -> String {
    format!("{}_{b}_{k}", WORDS[j])
}

fn child_row(b: usize, j: usize) -> usize {
    b * BLOCK + 1 + j
}

fn leaf_row(b: usize, j: usize, k: usize) -> usize {
    b * BLOCK + 1 + FANOUT + j * FANOUT + k
}

/// Leaves (depth 3) in a tree of `n`.
fn leaf_count(n: usize) -> usize {
    (n / BLOCK) * FANOUT * FANOUT + (n % BLOCK).saturating_sub(1 + FANOUT)
}

/// Descendants of block `b`'s top-level thread in a tree of `n`.
fn descendants(n: usize, b: usize) -> usize {
    (n - b * BLOCK).min(BLOCK) - 1
}

/// [`TARGETS`] leaves spread evenly over the tree, as (block, child, leaf).
fn target_leaves(n: usize) -> Vec<(usize, usize, usize)> {
    let leaves = leaf_count(n);
    (0..TARGETS)
        .map(|i| {
            let x = (2 * i + 1) * leaves / (2 * TARGETS);
            let (b, r) = (x / (FANOUT * FANOUT), x % (FANOUT * FANOUT));
            (b, r / FANOUT, r % FANOUT)
        })
        .collect()
}

/// [`TARGETS`] top-level threads with all 10 children, spread evenly over the tree.
fn target_tops(n: usize) -> Vec<usize> {
    let usable = if n / BLOCK > 0 { n / BLOCK } else { 1 };
    (0..TARGETS)
        .map(|i| (2 * i + 1) * usable / (2 * TARGETS))
        .collect()
}

// ---- seeding --------------------------------------------------------------------------------

struct Fixture {
    n: usize,
    dir: PathBuf,
    /// The SQLite file (seeded, and the source of the PostgreSQL copy).
    db: PathBuf,
    /// The server whose schema `bench_<n>` holds the rows measured, for the PostgreSQL run
    /// (`--db` is then this URL, working in that schema); `None`: the SQLite file.
    pg: Option<String>,
    /// The rows' group prefix: `serve`, or `serve_pg` for the PostgreSQL run.
    group: &'static str,
    session: PathBuf,
    script: PathBuf,
}

/// The seeded database of `n` threads, made once and then reused.
fn fixture(n: usize) -> Fixture {
    let dir = bench_root().join(n.to_string());
    let fx = Fixture {
        n,
        db: dir.join("bench.sqlite"),
        pg: None,
        group: "serve",
        session: dir.join("sessions").join("main.jsonl"),
        script: dir.join("script.json"),
        dir,
    };
    let marker = fx.dir.join("seeded");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(FIXTURE_VERSION) {
        return fx;
    }
    let _ = std::fs::remove_dir_all(&fx.dir);
    std::fs::create_dir_all(fx.session.parent().unwrap()).unwrap();
    std::fs::create_dir_all(fx.dir.join("work")).unwrap();
    std::fs::write(
        &fx.session,
        format!(
            "{}\n",
            json!({"type": "session", "version": 3, "id": SESSION_ID,
                   "timestamp": "2026-11-30T00:00:00.000Z", "cwd": fx.dir})
        ),
    )
    .unwrap();
    // Every run of a child: one tool call, then the 600-character answer; every later prompt
    // gets the default reply.
    std::fs::write(
        &fx.script,
        json!({"turns": [[{"tool": "bash", "args": {"command": "ls"}, "result": "src\ntests\n"},
                          {"text": answer(0)}]]})
        .to_string(),
    )
    .unwrap();
    let started = Instant::now();
    seed(&fx);
    std::fs::write(&marker, FIXTURE_VERSION).unwrap();
    eprintln!(
        "serve bench: seeded {n} threads in {:.1} s ({})",
        started.elapsed().as_secs_f64(),
        fx.dir.display()
    );
    fx
}

/// A 600-character answer that names its thread.
fn answer(g: usize) -> String {
    let mut s = format!("Thread {g} finished. ");
    let filler = "Checked the module's public entry points, ran the tests and found nothing that lacks coverage. ";
    while s.len() < 600 {
        s.push_str(filler);
    }
    s.truncate(600);
    s
}

fn seed(fx: &Fixture) {
    // 1. Real templates: the three managers, one contract B thread and one contract C worker,
    //    made by serve itself, so the cloned rows are exactly what serve writes.
    {
        let mut serve = Serve::start(fx);
        serve.call(
            "agent_spawn",
            json!({"path": "agent_000", "type": "worker", "task": "Survey the module and report"}),
        );
        serve.call(
            "threads_spawn",
            json!({"key": "template", "title": "Review the docs",
                   "directory": fx.dir.join("work"), "task": "Check the docs"}),
        );
        serve.close();
    }
    // 2. The tree and the clones, straight into the file.
    let mut conn = Connection::open(&fx.db).unwrap();
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    // Nothing else has the file open: write it without a journal, then go back to WAL.
    conn.execute_batch(
        "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -524288;",
    )
    .unwrap();
    let tx = conn.transaction().unwrap();
    let manager = |contract: &str| -> i64 {
        tx.query_row(
            "SELECT id FROM managers WHERE session_id = ?1 AND contract = ?2",
            params![SESSION_ID, contract],
            |r| r.get(0),
        )
        .unwrap()
    };
    let thread_manager = manager("thread");
    seed_tree(&tx, thread_manager, fx);
    seed_agents(&tx, manager("agent"));
    seed_workers(&tx);
    tx.commit().unwrap();
    conn.execute_batch("PRAGMA journal_mode = WAL;").unwrap();
    drop(conn);
}

fn seed_tree(tx: &rusqlite::Connection, manager: i64, fx: &Fixture) {
    let cwd = fx.dir.join("work").display().to_string();
    let mut thread = tx
        .prepare(
            "INSERT INTO threads (id, manager_id, path, parent_path, parent_id, task_name, name,
                 depth, cwd, args, status, phase, exit_kind, exit_code, session_file, session_id,
                 launch_seq, last_seq, created_at, updated_at, last_event_at, live_started_at,
                 prompt)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?8, '[]', 'closed', 'idle', 'exited', 0,
                 ?9, ?10, 1, 9, ?11, ?12, ?12, ?11, ?13)",
        )
        .unwrap();
    let mut event = tx
        .prepare("INSERT INTO thread_events (thread_id, seq, at, type, data) VALUES (?1, ?2, ?3, ?4, ?5)")
        .unwrap();
    let mut output = tx
        .prepare("INSERT INTO thread_output (thread_id, last_assistant_text) VALUES (?1, ?2)")
        .unwrap();
    let base = threadbase::time::ms_from_iso("2026-11-30T08:00:00.000Z").unwrap();
    let tool = r#"{"toolName":"bash"}"#;
    let tool_done = r#"{"toolName":"bash","error":false}"#;
    let closed = r#"{"exit":{"kind":"exited","code":0,"signal":null}}"#;
    let mut insert = |g: usize,
                      path: &str,
                      parent_path: &str,
                      parent_id: Option<&str>,
                      name: &str,
                      depth: i64| {
        let id = support::thread_id(g);
        let t0 = base + g as i64 * 10;
        let at = |ms: i64| threadbase::time::iso_from_ms(t0 + ms);
        let session = format!("{:08x}-0000-7000-8000-{:012x}", g, g);
        let text = answer(g);
        thread
            .execute(params![
                id,
                manager,
                path,
                parent_path,
                parent_id,
                name,
                depth,
                cwd,
                format!("2026-11-30T08-00-00-000Z_{session}.jsonl"),
                session,
                at(0),
                at(9),
                "Survey the module, list the public entry points and report any that lack tests.",
            ])
            .unwrap();
        let started = json!({"pid": 1000 + g % 30_000}).to_string();
        let said = json!({ "text": text }).to_string();
        let events: [(&str, &str); 9] = [
            ("thread_started", &started),
            ("turn_started", "{}"),
            ("tool_started", tool),
            ("tool_completed", tool_done),
            ("turn_completed", "{}"),
            ("turn_started", "{}"),
            ("assistant_message", &said),
            ("turn_completed", "{}"),
            ("thread_closed", closed),
        ];
        for (i, (kind, data)) in events.iter().enumerate() {
            event
                .execute(params![id, i as i64 + 1, at(i as i64 + 1), kind, data])
                .unwrap();
        }
        output.execute(params![id, text]).unwrap();
        id
    };
    let n = fx.n;
    let mut g = 0;
    let mut b = 0;
    while g < n {
        let top = top_path(b);
        let top_id = insert(g, &top, "/root", None, &top_name(b), 1);
        g += 1;
        for (j, word) in WORDS.iter().enumerate() {
            if g >= n {
                break;
            }
            debug_assert_eq!(g, child_row(b, j));
            let child = format!("{top}/{word}");
            insert(g, &child, &top, Some(&top_id), word, 2);
            g += 1;
        }
        for (j, word) in WORDS.iter().enumerate() {
            let child = format!("{top}/{word}");
            let child_id = support::thread_id(child_row(b, j));
            for k in 0..FANOUT {
                if g >= n {
                    break;
                }
                debug_assert_eq!(g, leaf_row(b, j, k));
                let name = leaf_name(b, j, k);
                insert(
                    g,
                    &format!("{child}/{name}"),
                    &child,
                    Some(&child_id),
                    &name,
                    3,
                );
                g += 1;
            }
        }
        b += 1;
    }
}

/// The columns of `table` an INSERT may name (generated columns left out).
fn insert_columns(tx: &Connection, table: &str) -> Vec<String> {
    let mut stmt = tx
        .prepare(&format!(
            "SELECT name, hidden FROM pragma_table_xinfo('{table}')"
        ))
        .unwrap();
    stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .filter(|(_, hidden)| *hidden == 0)
        .map(|(name, _)| name)
        .collect()
}

/// `INSERT INTO table (every column) SELECT … FROM table WHERE <key> = ?1`, with the columns in
/// `overrides` taken from parameters ?2, ?3, … instead of the source row.
fn clone_sql(tx: &Connection, table: &str, key: &str, overrides: &[&str]) -> String {
    // A manager's INTEGER PRIMARY KEY is left to SQLite.
    let cols: Vec<String> = insert_columns(tx, table)
        .into_iter()
        .filter(|c| !(table == "managers" && c == "id"))
        .collect();
    let select: Vec<String> = cols
        .iter()
        .map(|c| match overrides.iter().position(|o| o == c) {
            Some(i) => format!("?{}", i + 2),
            None => c.clone(),
        })
        .collect();
    format!(
        "INSERT INTO {table} ({}) SELECT {} FROM {table} WHERE {key} = ?1",
        cols.join(", "),
        select.join(", ")
    )
}

/// A thread's event and output rows copied to `to`.
fn clone_facts(tx: &Connection, from: &str, to: &str) {
    for table in ["thread_events", "thread_output"] {
        tx.prepare_cached(&clone_sql(tx, table, "thread_id", &["thread_id"]))
            .unwrap()
            .execute(params![from, to])
            .unwrap();
    }
}

/// 99 more contract B threads like the template `/root/agent_000`.
fn seed_agents(tx: &rusqlite::Connection, registry: i64) {
    let template: String = tx
        .query_row(
            "SELECT id FROM threads WHERE manager_id = ?1 AND path = '/root/agent_000'",
            [registry],
            |r| r.get(0),
        )
        .unwrap();
    let sql = clone_sql(tx, "threads", "id", &["id", "path", "task_name", "name"]);
    let mut stmt = tx.prepare(&sql).unwrap();
    for i in 1..SIDE {
        let id = support::thread_id(50_000_000 + i);
        let name = format!("agent_{i:03}");
        stmt.execute(params![template, id, format!("/root/{name}"), name, name])
            .unwrap();
        clone_facts(tx, &template, &id);
    }
}

fn coordinator(i: usize) -> String {
    format!("bench-coordinator-{i:03}")
}

/// 100 contract C workers, one for each of 100 coordinators, like the template worker.
fn seed_workers(tx: &rusqlite::Connection) {
    let (template, template_manager): (String, i64) = tx
        .query_row(
            "SELECT id, manager_id FROM threads WHERE coordinator_id = ?1",
            [SESSION_ID],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let manager_sql = clone_sql(tx, "managers", "id", &["session_id"]);
    let worker_sql = clone_sql(
        tx,
        "threads",
        "id",
        &[
            "id",
            "manager_id",
            "path",
            "task_name",
            "session_id",
            "coordinator_id",
        ],
    );
    for i in 0..SIDE {
        let coord = coordinator(i);
        tx.prepare_cached(&manager_sql)
            .unwrap()
            .execute(params![template_manager, coord])
            .unwrap();
        let manager = tx.last_insert_rowid();
        let id = format!("ses_{:016x}{:016x}", 0xbe_c0de_u64, i);
        tx.prepare_cached(&worker_sql)
            .unwrap()
            .execute(params![
                template,
                id,
                manager,
                format!("/{id}"),
                id,
                id,
                coord
            ])
            .unwrap();
        clone_facts(tx, &template, &id);
    }
}

/// Deletes what an earlier run's serve added (its live children and their session files).
fn clean(fx: &Fixture) {
    let conn = Connection::open(&fx.db).unwrap();
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    conn.execute_batch("PRAGMA foreign_keys = ON;").unwrap();
    let filter =
        "manager_id = (SELECT id FROM managers WHERE session_id = ?1 AND contract = 'thread')
                  AND path GLOB '/root/live_*'";
    let files: Vec<String> = conn
        .prepare(&format!(
            "SELECT session_file FROM threads WHERE {filter} AND session_file IS NOT NULL"
        ))
        .unwrap()
        .query_map([SESSION_ID], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    conn.execute(&format!("DELETE FROM threads WHERE {filter}"), [SESSION_ID])
        .unwrap();
    for f in files {
        let _ = std::fs::remove_file(fx.session.parent().unwrap().join(f));
    }
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
}

/// The PostgreSQL run's database: schema `bench_<n>` on the server at `url`, made afresh
/// (migrated by this build's engine) and filled with every row of the seeded SQLite
/// file, table by table. The copy runs with `session_replication_role = replica`, so neither
/// foreign keys nor the usage triggers fire (the roll-up tables are copied as they are);
/// `threads.rowid`, a column there, takes SQLite's rowid; identities restart past the copied
/// ids. Returns the URL serve is given (`…?options=-csearch_path%3Dbench_<n>`).
fn copy_to_postgres(fx: &Fixture, url: &str) -> String {
    let started = Instant::now();
    let schema = format!("bench_{}", fx.n);
    let schema_url = support::pg_fresh_schema(url, &schema);
    drop(threadbase::Store::open(&schema_url).expect("migrate the PostgreSQL schema"));
    let pg = support::Pg::connect(&schema_url);
    let lite =
        Connection::open_with_flags(&fx.db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let in_sqlite: Vec<String> = lite
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let tables = pg.rows::<String>(
        "SELECT table_name::text FROM information_schema.tables
         WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1",
    );
    pg.exec("BEGIN; SET LOCAL session_replication_role = replica;");
    let mut copied = 0usize;
    for table in tables.into_iter().map(|mut t| t.remove(0)) {
        if !in_sqlite.contains(&table) || table.starts_with("refinery") {
            continue;
        }
        let cols: Vec<String> = pg
            .rows::<String>(&format!(
                "SELECT column_name::text FROM information_schema.columns
                 WHERE table_schema = current_schema() AND table_name = '{table}'
                   AND is_generated = 'NEVER' ORDER BY ordinal_position"
            ))
            .into_iter()
            .map(|mut c| c.remove(0))
            .collect();
        let lite_cols = insert_columns(&lite, &table);
        let select: Vec<&str> = cols
            .iter()
            .map(|c| {
                assert!(
                    lite_cols.contains(c) || c == "rowid",
                    "{table}.{c} is not in the SQLite file"
                );
                c.as_str()
            })
            .collect();
        let mut stmt = lite
            .prepare(&format!("SELECT {} FROM {table}", select.join(", ")))
            .unwrap();
        let mut rows = stmt.query([]).unwrap();
        let head = format!(
            "INSERT INTO {table} ({}) OVERRIDING SYSTEM VALUE VALUES ",
            cols.join(", ")
        );
        let mut sql = String::new();
        let mut in_batch = 0;
        while let Some(row) = rows.next().unwrap() {
            sql.push_str(if in_batch == 0 { &head } else { "," });
            sql.push('(');
            for i in 0..cols.len() {
                if i > 0 {
                    sql.push(',');
                }
                push_literal(&mut sql, row.get_ref(i).unwrap());
            }
            sql.push(')');
            in_batch += 1;
            copied += 1;
            if in_batch == 1000 {
                pg.exec(&sql);
                sql.clear();
                in_batch = 0;
            }
        }
        if in_batch > 0 {
            pg.exec(&sql);
        }
    }
    pg.exec("COMMIT;");
    for ic in pg.rows::<String>(
        "SELECT table_name::text, column_name::text FROM information_schema.columns
         WHERE table_schema = current_schema() AND is_identity = 'YES'",
    ) {
        let (t, c) = (&ic[0], &ic[1]);
        pg.exec(&format!(
            "SELECT setval(pg_get_serial_sequence('{t}', '{c}'),
                           coalesce((SELECT max({c}) FROM {t}), 0) + 1, false);"
        ));
    }
    pg.exec("ANALYZE;");
    let threads = pg.rows::<i64>("SELECT count(*) FROM threads")[0][0];
    let want: i64 = lite
        .query_row("SELECT count(*) FROM threads", [], |r| r.get(0))
        .unwrap();
    assert_eq!(threads, want, "threads copied to {schema}");
    eprintln!(
        "serve bench: copied {copied} rows to PostgreSQL schema {schema} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    schema_url
}

/// `v` as a PostgreSQL literal (quoted: the column's type reads it).
fn push_literal(sql: &mut String, v: rusqlite::types::ValueRef<'_>) {
    use rusqlite::types::ValueRef;
    match v {
        ValueRef::Null => sql.push_str("NULL"),
        ValueRef::Integer(i) => {
            let _ = write!(sql, "'{i}'");
        }
        ValueRef::Real(r) => {
            let _ = write!(sql, "'{r:?}'");
        }
        ValueRef::Text(t) => {
            sql.push('\'');
            sql.push_str(&String::from_utf8_lossy(t).replace('\'', "''"));
            sql.push('\'');
        }
        ValueRef::Blob(b) => {
            sql.push_str("'\\x");
            for byte in b {
                let _ = write!(sql, "{byte:02x}");
            }
            sql.push('\'');
        }
    }
}

/// Deletes the session files of the live children the PostgreSQL run's serve started (its
/// schema is made afresh by the next run).
fn clean_sessions(fx: &Fixture) {
    let Some(url) = &fx.pg else { return };
    for f in support::Pg::connect(url).rows::<String>(
        "SELECT session_file FROM threads
         WHERE path LIKE '/root/live\\_%' AND session_file IS NOT NULL",
    ) {
        let _ = std::fs::remove_file(fx.session.parent().unwrap().join(&f[0]));
    }
}

// ---- the client -----------------------------------------------------------------------------

/// A real `threadbase serve` over pipes, one request at a time.
struct Serve {
    child: Child,
    pipe: support::Pipe,
}

impl Serve {
    fn start(fx: &Fixture) -> Serve {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(fx.dir.join("serve.log"))
            .unwrap();
        let bin = bin();
        let mut cmd = Command::new(&bin);
        cmd.arg("--db");
        match &fx.pg {
            Some(url) => cmd.arg(url),
            None => cmd.arg(&fx.db),
        };
        cmd.arg("serve")
            .arg("--session-file")
            .arg(&fx.session)
            .arg("--cwd")
            .arg(&fx.dir)
            .current_dir(&fx.dir);
        for k in serve_env::INHERITED {
            cmd.env_remove(k);
        }
        cmd.env(
            "THREADBASE_PI_COMMAND",
            json!([bin, "scripted-agent", "--script", fx.script]).to_string(),
        )
        .env("PI_CODING_AGENT_DIR", fx.dir.join("agent"))
        .stderr(log);
        Serve::spawn(cmd)
    }

    /// The echo program (see [`echo`]) answering with lines of `size` bytes, driven like serve.
    fn echo(size: usize) -> Serve {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.env("THREADBASE_BENCH_ECHO", size.to_string());
        Serve::spawn(cmd)
    }

    fn spawn(mut cmd: Command) -> Serve {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        // The program inherits this thread's CPUs (see `Placement`); this thread then moves.
        let placement = Placement::from_env();
        placement.pin(0);
        let mut child = cmd.spawn().expect("spawn the measured program");
        placement.pin(placement.client_cpu());
        Serve {
            pipe: support::Pipe::new(&mut child, "serve.log"),
            child,
        }
    }

    /// One request and its response line, without its LF ([`support::Pipe::roundtrip`]).
    fn roundtrip(&mut self, method: &str, params: &str) -> &[u8] {
        self.pipe.roundtrip(method, params)
    }

    /// One request whose result must not be an error; returns the parsed result.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.pipe.call(method, &params)
    }

    fn status_kib(&self, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in /proc/<pid>/status"))
    }

    /// Resets the peak RSS (`VmHWM`) to the current RSS.
    fn reset_peak(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5").unwrap();
    }

    /// Closes stdin (serve stops its children and exits 0) and waits.
    fn close(mut self) {
        self.pipe.close_stdin();
        self.pipe.drain();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "serve exited with {status}");
    }
}

// ---- where the client and serve run -----------------------------------------------------------

/// `THREADBASE_BENCH_PIN`: where this client and the measured program run. On an idle VM a
/// request whose client and server sit on different cores pays a cross-core wake-up each way
/// (tens of µs each), one that shares a core does not; left free, the scheduler picks per
/// stretch of requests, so the figures mix the two. `same`: both on CPU 0; `split`: the
/// program on CPU 0, this client on CPU 1; unset or `free`: wherever the scheduler puts them.
#[derive(Clone, Copy, PartialEq)]
enum Placement {
    Free,
    Same,
    Split,
}

impl Placement {
    fn from_env() -> Placement {
        match std::env::var("THREADBASE_BENCH_PIN").as_deref() {
            Ok("same") => Placement::Same,
            Ok("split") => Placement::Split,
            Ok("free") | Ok("") | Err(_) => Placement::Free,
            Ok(other) => panic!("THREADBASE_BENCH_PIN={other:?}: use same, split or free"),
        }
    }

    fn client_cpu(self) -> usize {
        if self == Placement::Split {
            1
        } else {
            0
        }
    }

    /// Pins the calling thread to `cpu` (nothing when free).
    fn pin(self, cpu: usize) {
        if self == Placement::Free {
            return;
        }
        let mut set = rustix::thread::CpuSet::new();
        set.set(cpu);
        rustix::thread::sched_setaffinity(None, &set).expect("sched_setaffinity");
    }
}

// ---- the rows -------------------------------------------------------------------------------

fn configure<'c>(c: &'c mut Criterion, name: &str, slow: bool) -> BenchmarkGroup<'c, WallTime> {
    let mut group = c.benchmark_group(name);
    if slow {
        group
            .sample_size(10)
            .sampling_mode(criterion::SamplingMode::Flat)
            .warm_up_time(Duration::from_millis(1))
            .measurement_time(Duration::from_millis(1));
    } else {
        group
            .sample_size(40)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3));
    }
    group
}

/// Times `requests` (method, params), cycled, one roundtrip per iteration.
fn row(c: &mut Criterion, serve: &mut Serve, name: &str, n: usize, requests: &[(&str, String)]) {
    row_with(c, serve, name, n, requests, false);
}

fn row_with(
    c: &mut Criterion,
    serve: &mut Serve,
    name: &str,
    n: usize,
    requests: &[(&str, String)],
    slow: bool,
) {
    let mut g = configure(c, name, slow);
    let mut ran = false;
    g.bench_function(BenchmarkId::from_parameter(n), |b| {
        ran = true;
        let mut i = 0;
        b.iter(|| {
            let (method, params) = &requests[i % requests.len()];
            i += 1;
            serve.roundtrip(method, params).len()
        })
    });
    g.finish();
    // Rows the criterion filter left out are not timed either.
    if ran {
        latencies(serve, name, n, requests, if slow { 11 } else { 2001 });
    }
}

/// Criterion's figure is a mean per sample (each sample times many requests), so a few slow
/// requests move it. What one request costs is its own distribution: time `count` requests
/// one at a time and report the median and the 90th percentile, printed and written to
/// `target/criterion/serve_latency/<row>/<n>.json`.
fn latencies(serve: &mut Serve, name: &str, n: usize, requests: &[(&str, String)], count: usize) {
    let ns: Vec<u64> = (0..count)
        .map(|i| {
            let (method, params) = &requests[i % requests.len()];
            let started = Instant::now();
            serve.roundtrip(method, params);
            started.elapsed().as_nanos() as u64
        })
        .collect();
    // `serve_latency` for the SQLite rows, `serve_pg_latency` for the PostgreSQL run's.
    let group = name.split_once('/').map_or(name, |(g, _)| g);
    report_latency(&format!("{group}_latency"), name, n, ns);
}

fn thread_req(params: Value) -> (&'static str, String) {
    ("thread", params.to_string())
}

fn bench_size(c: &mut Criterion, n: usize) {
    let fx = fixture(n);
    clean(&fx);
    let requests = serve_rows(c, &fx);
    let requests = ExtensionRequests {
        by_id: &requests.0,
        parents: &requests.1,
        ancestors: &requests.2,
    };
    extension_rows(c, &fx, n, &requests);
    if let Some(url) = support::pg_url() {
        // Copied without the live children the rows above started.
        clean(&fx);
        let pg = Fixture {
            pg: Some(copy_to_postgres(&fx, &url)),
            group: "serve_pg",
            n,
            dir: fx.dir.clone(),
            db: fx.db.clone(),
            session: fx.session.clone(),
            script: fx.script.clone(),
        };
        serve_rows(c, &pg);
        clean_sessions(&pg);
    }
}

type Requests = Vec<(&'static str, String)>;

/// The `<group>/…` rows on `fx`'s database; returns the requests of the poll by id, list
/// `parent` and list `ancestor` rows.
fn serve_rows(c: &mut Criterion, fx: &Fixture) -> (Requests, Requests, Requests) {
    let n = fx.n;
    let group = fx.group;
    let name = |row: &str| format!("{group}/{row}");
    let mut serve = Serve::start(fx);
    first_event_row(&mut serve, fx);

    // 8 live children, idle after their first answer.
    for i in 0..LIVE {
        serve.call(
            "thread",
            json!({"action": "start", "prompt": "Stand by for follow-ups.", "taskName": format!("live_{i}")}),
        );
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = serve.call("thread", json!({"action": "list", "state": "live"}));
        let snaps = r["details"]["threads"].as_array().unwrap();
        if snaps.len() == LIVE && snaps.iter().all(|s| s["phase"] == "idle") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the live children never all went idle: {r}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // Requests, each checked once before it is timed.
    let leaves = target_leaves(n);
    let mut by_id = Vec::new();
    let mut by_path = Vec::new();
    let mut by_relative = Vec::new();
    let mut by_name = Vec::new();
    for &(b, j, k) in &leaves {
        let name = leaf_name(b, j, k);
        let relative = format!("{}/{}/{name}", top_name(b), WORDS[j]);
        let path = format!("/root/{relative}");
        let id = support::thread_id(leaf_row(b, j, k));
        for (list, reference) in [
            (&mut by_id, id.clone()),
            (&mut by_path, path.clone()),
            (&mut by_relative, relative),
            (&mut by_name, name),
        ] {
            let params = json!({"action": "poll", "id": reference});
            let r = serve.call("thread", params.clone());
            assert_eq!(r["details"]["snapshot"]["id"], id.as_str(), "{params}");
            assert_eq!(r["details"]["snapshot"]["path"], path.as_str(), "{params}");
            list.push(thread_req(params));
        }
    }
    let tops = target_tops(n);
    let mut parents = Vec::new();
    let mut ancestors = Vec::new();
    for &b in &tops {
        let params = json!({"action": "list", "parent": top_path(b)});
        let r = serve.call("thread", params.clone());
        assert_eq!(r["details"]["count"], FANOUT, "{params}");
        parents.push(thread_req(params));
        let params = json!({"action": "list", "ancestor": top_path(b)});
        let r = serve.call("thread", params.clone());
        assert_eq!(r["details"]["count"], descendants(n, b), "{params}");
        ancestors.push(thread_req(params));
    }
    let live = vec![thread_req(json!({"action": "list", "state": "live"}))];
    let status = vec![("agent_status", "{}".to_string())];
    let r = serve.call("agent_status", json!({}));
    assert_eq!(
        r["details"].as_array().map(Vec::len),
        Some(SIDE),
        "agent_status: {r}"
    );
    let ids: Vec<String> = (0..SIDE).map(coordinator).collect();
    let snapshot = vec![(
        "threads.snapshot",
        json!({ "coordinatorIDs": ids }).to_string(),
    )];
    let r = serve.call("threads.snapshot", json!({ "coordinatorIDs": ids }));
    assert_eq!(
        r["workers"].as_array().map(Vec::len),
        Some(SIDE),
        "threads.snapshot"
    );

    // The answers those checks rendered are kept in serve's memory until the database
    // changes (its own heartbeat, every 5 s, is a change): the rows are timed as a user's
    // later calls find them.
    // Idle: started, 8 live children, every request above answered once, then a pause (when
    // serve cuts its page cache back).
    std::thread::sleep(threadbase::store::IDLE_AFTER + Duration::from_secs(1));
    let idle_kib = serve.status_kib("VmRSS:");
    // The request loop alone: a line in, an error line out, no store access.
    row(
        c,
        &mut serve,
        &name("floor_unknown_method"),
        n,
        &[("nope", "{}".to_string())],
    );
    // The same for a plain program that answers with a line as long as list `parent`'s: the
    // floor under that row (pipes, wake-ups and the bytes, no work).
    for (row_name, reqs) in [
        (name("floor_echo_list_parent_bytes"), &parents),
        (name("floor_echo_list_ancestor_bytes"), &ancestors),
    ] {
        let bytes = serve.roundtrip(reqs[0].0, &reqs[0].1).len() + 1;
        let mut echo = Serve::echo(bytes);
        row(c, &mut echo, &row_name, n, &[("echo", "{}".to_string())]);
        echo.close();
    }
    row(c, &mut serve, &name("poll_id"), n, &by_id);
    row(c, &mut serve, &name("poll_path"), n, &by_path);
    row(c, &mut serve, &name("poll_relative"), n, &by_relative);
    row(c, &mut serve, &name("poll_name"), n, &by_name);
    row(c, &mut serve, &name("list_parent_10"), n, &parents);
    row(c, &mut serve, &name("list_ancestor_110"), n, &ancestors);
    row(c, &mut serve, &name("list_live_8"), n, &live);
    row(c, &mut serve, &name("agent_status_100"), n, &status);
    row(c, &mut serve, &name("snapshot_100"), n, &snapshot);

    // And again after thousands of each (what the allocator keeps).
    let used_kib = serve.status_kib("VmRSS:");
    // And once serve has seen a pause (it cuts its page cache back then).
    std::thread::sleep(threadbase::store::IDLE_AFTER + Duration::from_secs(1));
    let paused_kib = serve.status_kib("VmRSS:");
    let mut memory = json!({"threads": n, "idle_rss_kib": idle_kib, "rss_after_rows_kib": used_kib, "rss_after_pause_kib": paused_kib});
    eprintln!(
        "{group}/memory/{n}: idle RSS {:.1} MiB, {:.1} MiB after the timed rows, {:.1} MiB after a pause",
        idle_kib as f64 / 1024.0,
        used_kib as f64 / 1024.0,
        paused_kib as f64 / 1024.0
    );
    if n <= list_all_max() {
        let all = vec![thread_req(json!({"action": "list"}))];
        serve.reset_peak();
        let started = Instant::now();
        let bytes = serve.roundtrip("thread", &all[0].1).len();
        let first = started.elapsed();
        let peak_kib = serve.status_kib("VmHWM:");
        eprintln!(
            "{group}/memory/{n}: peak RSS {:.1} MiB during one list of all ({} threads, {:.1} MB line, {:.3} s)",
            peak_kib as f64 / 1024.0,
            n + LIVE,
            bytes as f64 / 1e6,
            first.as_secs_f64()
        );
        memory["list_all_peak_rss_kib"] = json!(peak_kib);
        memory["list_all_response_bytes"] = json!(bytes);
        memory["list_all_first_s"] = json!(first.as_secs_f64());
        // That list kept the answers it rendered in serve's memory (up to its bound,
        // `engine/cache.rs` `MAX_BYTES`), as the timed ones do.
        row_with(c, &mut serve, &name("list_all"), n, &all, n >= 10_000);
    }
    let out =
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("target/criterion/{group}_memory"));
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join(format!("{n}.json")), memory.to_string()).unwrap();
    serve.close();
    (by_id, parents, ancestors)
}

// ---- the extension's tool call ---------------------------------------------------------------

/// The rows' requests, as `thread_req` made them for serve.
struct ExtensionRequests<'a> {
    by_id: &'a [(&'static str, String)],
    parents: &'a [(&'static str, String)],
    ancestors: &'a [(&'static str, String)],
}

/// What the Pi model pays (issue 27): the extension's `thread` tool, its `execute()` called in
/// Node (tools/pi) as Pi calls it, from the call to the parsed result, through the
/// extension's own `threadbase serve` on this database (the serve of the rows above is closed
/// first: its 8 live children are then closed threads). Rows `extension/poll_id/<n>`,
/// `extension/list_parent_10/<n>`, `extension/list_ancestor_110/<n>`, `extension/list_all/<n>`
/// (up to `THREADBASE_BENCH_LIST_ALL_MAX`) and `extension/first_call/<n>` (a fresh extension
/// instance whose first call, a poll, starts serve). Each also prints its per-call median and
/// 90th percentile (`target/criterion/extension_latency/<row>/<n>.json`).
/// `THREADBASE_BENCH_EXTENSION=FILE` measures another copy of `index.ts` (with
/// `THREADBASE_BENCH_BIN`, a base build's pair). Without Node and Pi's loader in tools/pi
/// the rows are skipped with the reason.
fn extension_rows(c: &mut Criterion, fx: &Fixture, n: usize, reqs: &ExtensionRequests<'_>) {
    let node = match extension_driver::node() {
        Ok(node) => node,
        Err(why) => {
            eprintln!("extension rows skipped: {why}");
            return;
        }
    };
    let extension = std::env::var_os("THREADBASE_BENCH_EXTENSION")
        .filter(|f| !f.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("pi-extension/index.ts"));
    let env = [
        ("THREADBASE_BIN", bin()),
        ("THREADBASE_DB", fx.db.display().to_string()),
        (
            "PI_CODING_AGENT_DIR",
            fx.dir.join("agent").display().to_string(),
        ),
    ];
    let mut driver =
        extension_driver::Driver::start(&node, &extension, &fx.dir, &env, &serve_env::INHERITED);
    let session = json!({"file": fx.session, "id": SESSION_ID, "cwd": fx.dir});
    driver.load(session.clone());
    let params = |reqs: &[(&str, String)]| -> Vec<Value> {
        reqs.iter()
            .map(|(_, p)| serde_json::from_str(p).unwrap())
            .collect()
    };
    // Each request once, checked, before it is timed.
    for p in params(reqs.by_id)
        .into_iter()
        .chain(params(reqs.parents))
        .chain(params(reqs.ancestors))
    {
        let a = driver.call("thread", p.clone());
        assert!(a.get("error").is_none(), "{p}: {a}");
    }
    let mut timed = |c: &mut Criterion, name: &str, list: Vec<Value>, slow: bool| {
        let mut g = configure(c, name, slow);
        let mut ran = false;
        g.bench_function(BenchmarkId::from_parameter(n), |b| {
            ran = true;
            b.iter_custom(|iters| {
                let ns = driver.time("thread", &list, iters as usize);
                Duration::from_nanos(ns.iter().sum())
            })
        });
        g.finish();
        if ran {
            let ns = driver.time("thread", &list, if slow { 11 } else { 2001 });
            report_latency("extension_latency", name, n, ns);
        }
    };
    timed(c, "extension/poll_id", params(reqs.by_id), false);
    timed(c, "extension/list_parent_10", params(reqs.parents), false);
    timed(
        c,
        "extension/list_ancestor_110",
        params(reqs.ancestors),
        false,
    );
    if n <= list_all_max() {
        timed(
            c,
            "extension/list_all",
            vec![json!({"action": "list"})],
            n >= 10_000,
        );
    }
    // The first call of a fresh instance starts serve.
    let first = params(reqs.by_id).remove(0);
    let mut g = configure(c, "extension/first_call", true);
    let mut ran = false;
    g.bench_function(BenchmarkId::from_parameter(n), |b| {
        ran = true;
        b.iter_custom(|iters| {
            let ns = driver.first_calls(session.clone(), first.clone(), iters as usize);
            Duration::from_nanos(ns.iter().sum())
        })
    });
    g.finish();
    if ran {
        let ns = driver.first_calls(session.clone(), first.clone(), 11);
        report_latency("extension_latency", "extension/first_call", n, ns);
    }
    driver.close();
}

/// `<group>/start_first_event/<n>`: from a `thread start` request sent to serve until the new
/// child's first event is visible to a reader of the same database (this process, polling
/// `events::rows_of_thread` on a store of its own). It counts the child's start, its first
/// line, the ingest batch and its commit. Each child is stopped (forced) and closed before
/// the next starts; not a criterion row (each sample starts a process), so it runs whatever
/// the filter and prints its median and 90th percentile of 11. The reader looks every 250 µs.
fn first_event_row(serve: &mut Serve, fx: &Fixture) {
    let db = match &fx.pg {
        Some(url) => url.clone(),
        None => fx.db.display().to_string(),
    };
    let store = threadbase::Store::open(&db).expect("open the bench database");
    let mut ns = Vec::new();
    for k in 0..11 {
        let started = Instant::now();
        let r = serve.call(
            "thread",
            json!({"action": "start", "prompt": "Stand by for follow-ups.", "taskName": format!("live_first_{k}")}),
        );
        let id = threadbase::domain::ThreadId::new(
            r["details"]["snapshot"]["id"]
                .as_str()
                .expect("a started thread's id"),
        );
        loop {
            let conn = store.read().expect("a reader");
            let events = threadbase::store::events::rows_of_thread(&conn, &id).expect("events");
            if !events.is_empty() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{id} recorded no event in 30 s"
            );
            // Not a spin: on 2 cores it would take the CPU the child and serve start on.
            std::thread::sleep(Duration::from_micros(250));
        }
        ns.push(started.elapsed().as_nanos() as u64);
        serve.call(
            "thread",
            json!({"action": "stop", "id": id.as_str(), "force": true}),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while serve.call("thread", json!({"action": "list", "state": "live"}))["details"]["count"]
            != 0
        {
            assert!(
                Instant::now() < deadline,
                "{id} never closed after its stop"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let name = format!("{}/start_first_event", fx.group);
    report_latency(&format!("{}_latency", fx.group), &name, fx.n, ns);
}

/// Prints a row's per-call median and 90th percentile and writes them to
/// `target/criterion/<folder>/<row>/<n>.json`.
fn report_latency(folder: &str, name: &str, n: usize, ns: Vec<u64>) {
    let mut times: Vec<f64> = ns.iter().map(|&t| t as f64 / 1e3).collect();
    times.sort_by(f64::total_cmp);
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    let (p50, p90) = (at(0.5), at(0.9));
    let count = times.len();
    eprintln!("{name}/{n}: per request median {p50:.1} µs, p90 {p90:.1} µs ({count} requests)");
    let row = name.split_once('/').map_or(name, |(_, r)| r);
    let out = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/criterion")
        .join(folder)
        .join(row);
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(
        out.join(format!("{n}.json")),
        json!({"threads": n, "requests": count, "median_us": p50, "p90_us": p90}).to_string(),
    )
    .unwrap();
}

fn benches(c: &mut Criterion) {
    for n in sizes() {
        bench_size(c, n);
    }
}

criterion_group!(serve_benches, benches);

/// The bench, or (when `THREADBASE_BENCH_ECHO` is set) the echo program of the
/// `floor_echo_*` rows.
fn main() {
    if let Some(size) = std::env::var("THREADBASE_BENCH_ECHO")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        echo(size);
        return;
    }
    serve_benches();
    Criterion::default().configure_from_args().final_summary();
}

/// A plain program that answers every request line with one line of `size` bytes (written
/// with one `write`), `{"id": <the request's id>, "result": "xx…"}`: what any server that
/// answers with a line that long pays for the pipes and wake-ups alone. Like serve, it widens
/// its stdout pipe to 1 MiB first (with the default 64 KiB, a 600 KB line crosses in ten
/// steps, each a wake-up of both sides).
fn echo(size: usize) {
    use std::os::fd::AsFd;
    let mut out = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned().unwrap());
    let _ = rustix::pipe::fcntl_setpipe_size(&out, 1 << 20);
    let mut lines = BufReader::new(std::io::stdin().lock());
    let mut line = String::new();
    let mut answer = Vec::with_capacity(size + 64);
    while lines.read_line(&mut line).is_ok_and(|n| n > 0) {
        let id = line
            .split_once("\"id\":")
            .and_then(|(_, rest)| rest.split(',').next())
            .unwrap_or("null")
            .trim()
            .to_string();
        answer.clear();
        answer.extend_from_slice(format!("{{\"id\":{id},\"result\":\"").as_bytes());
        answer.resize(size.saturating_sub(3).max(answer.len()), b'x');
        answer.extend_from_slice(b"\"}\n");
        if out.write_all(&answer).is_err() {
            return;
        }
        line.clear();
    }
}
