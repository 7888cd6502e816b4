//! Shared bench fixtures: a temp database and a bulk-seeded contract A thread tree.
//!
//! The tree is made of blocks of [`BLOCK`] threads under one `thread` manager:
//!
//! ```text
//! /root/task_<b>                      top-level, 10 children, 100 descendants
//! /root/task_<b>/<word j>             j = 0..9; j < 9 has 10 children, j = 9 none
//! /root/task_<b>/<word j>/<word j>_<b>_<k>   k = 0..9, leaves
//! ```
//!
//! so every top-level thread is a parent with exactly 10 children and a subtree of k = 100,
//! and every child `j < 9` a subtree of k = 10. Child names repeat in every block (duplicate
//! task names, as in real trees); top-level and leaf names are unique. A size that is not a
//! multiple of [`BLOCK`] ends with one truncated block. Ids are a deterministic bijection of
//! the row number, so they are scattered over the id index like random ids, yet each can be
//! recomputed without keeping 1M strings around.

// Each bench target compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use std::time::Instant;
use threadbase::domain::{ManagerId, Phase, SessionId, ThreadId, ThreadStatus};

use tempfile::TempDir;
use threadbase::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec, NewThread};
use threadbase::Store;

/// Threads per block: one top-level thread, 10 children, 90 grandchildren.
pub const BLOCK: usize = 101;
/// Children of every top-level thread.
pub const CHILDREN: usize = 10;
/// Children of child `j` for `j < CHILDREN - 1`; the last child is a leaf.
pub const GRANDCHILDREN: usize = 10;

const WORDS: [&str; CHILDREN] = [
    "plan", "impl", "tests", "review", "docs", "lint", "bench", "fix", "refactor", "deploy",
];

/// A bench database in its own temp folder (removed on drop).
pub struct BenchDb {
    pub store: Store,
    /// What opens this database again: the file's path, or the PostgreSQL URL with its
    /// schema (`Store::path` shows a URL without its options, so it names another schema).
    pub location: String,
    pub manager_id: ManagerId,
    _dir: TempDir,
}

/// Opens a fresh store (migrations run) in a temp folder and creates one contract A manager.
pub fn open_db() -> BenchDb {
    let dir = tempfile::Builder::new()
        .prefix("threadbase-bench-")
        .tempdir()
        .expect("temp dir");
    let location = dir.path().join("bench.db").display().to_string();
    let store = Store::open(&location).expect("open store");
    let manager_id = add_manager(&store);
    BenchDb {
        store,
        location,
        manager_id,
        _dir: dir,
    }
}

/// The bench's one contract A manager.
fn add_manager(store: &Store) -> ManagerId {
    store
        .write(|tx| {
            upsert_manager(
                tx,
                &ManagerSpec {
                    session_id: &SessionId::new("bench-session"),
                    contract: Contract::Thread,
                    scope_path: "/root",
                    depth: 0,
                    self_thread_id: None,
                    session_file: None,
                    cwd: Some("/work/project"),
                    owner_pid: Some(std::process::id() as i64),
                    owner_started_at: None,
                },
            )
        })
        .expect("manager")
}

/// The id of row `g`: `thread_` + 12 hex digits, a bijection of `g` on 48 bits
/// (odd multiplier and xorshift are both invertible mod 2^48), so ids never collide.
pub fn thread_id(g: usize) -> String {
    const MASK: u64 = (1 << 48) - 1;
    let mut x = (g as u64).wrapping_add(0x5bd1_e995) & MASK;
    x = x.wrapping_mul(0x9e37_79b9_7f4b) & MASK;
    x ^= x >> 23;
    x = x.wrapping_mul(0xc2b2_ae3d_27d5) & MASK;
    x ^= x >> 19;
    format!("thread_{x:012x}")
}

/// Canonical path of block `b`'s top-level thread.
pub fn top_path(b: usize) -> String {
    format!("/root/task_{b:06}")
}

/// Task name and canonical path of child `j` of block `b`.
pub fn child_path(b: usize, j: usize) -> String {
    format!("{}/{}", top_path(b), WORDS[j])
}

/// Task name of grandchild `k` of child `j` of block `b` (unique in the tree).
pub fn grandchild_name(b: usize, j: usize, k: usize) -> String {
    format!("{}_{b}_{k}", WORDS[j])
}

/// The child word `j` (a task name shared by every block).
pub fn child_name(j: usize) -> &'static str {
    WORDS[j]
}

/// Row number of block `b`'s top-level thread.
pub fn top_row(b: usize) -> usize {
    b * BLOCK
}

/// Row number of grandchild `k` of child `j` of block `b`.
pub fn grandchild_row(b: usize, j: usize, k: usize) -> usize {
    b * BLOCK + 1 + CHILDREN + j * GRANDCHILDREN + k
}

/// A seeded tree: how many threads and how many complete blocks it has.
#[derive(Debug, Clone, Copy)]
pub struct Tree {
    pub manager_id: ManagerId,
    pub threads: usize,
    pub full_blocks: usize,
}

/// Inserts `n` threads in one write transaction through the engine's own `insert_thread`,
/// then checkpoints the WAL into the main file so readers see a settled database.
pub fn seed_tree(db: &BenchDb, n: usize) -> Tree {
    let started = Instant::now();
    let manager_id = db.manager_id;
    let prompt = "Survey the module, list the public entry points and report any that lack tests.";
    db.store
        .write(|tx| {
            // A bulk load with a random-order primary key wants more than the default 2 MiB of
            // page cache; this is the bench writer's connection only.
            tx.set_page_cache_kib(262_144)?;
            let mut g = 0usize;
            let mut b = 0usize;
            while g < n {
                let top = top_path(b);
                let top_id = thread_id(top_row(b));
                let mut insert = |id: String,
                                  path: String,
                                  parent_path: &str,
                                  parent_id: Option<&str>,
                                  task_name: String,
                                  depth: i64|
                 -> threadbase::Result<bool> {
                    if g >= n {
                        return Ok(false);
                    }
                    insert_thread(
                        tx,
                        &NewThread {
                            id: id.into(),
                            manager_id,
                            path,
                            parent_path: Some(parent_path.to_string()),
                            parent_id: parent_id.map(ThreadId::from),
                            name: task_name.clone(),
                            task_name,
                            depth,
                            cwd: "/work/project".to_string(),
                            args: Vec::new(),
                            status: ThreadStatus::Live,
                            phase: if g.is_multiple_of(3) {
                                Phase::Busy
                            } else {
                                Phase::Idle
                            },
                            prompt: Some(prompt.to_string()),
                            ..NewThread::default()
                        },
                    )?;
                    g += 1;
                    Ok(true)
                };
                insert(
                    top_id.clone(),
                    top.clone(),
                    "/root",
                    None,
                    format!("task_{b:06}"),
                    1,
                )?;
                for (j, word) in WORDS.iter().enumerate() {
                    insert(
                        thread_id(b * BLOCK + 1 + j),
                        child_path(b, j),
                        &top,
                        Some(&top_id),
                        word.to_string(),
                        2,
                    )?;
                }
                for j in 0..CHILDREN - 1 {
                    let parent = child_path(b, j);
                    let parent_id = thread_id(b * BLOCK + 1 + j);
                    for k in 0..GRANDCHILDREN {
                        let name = grandchild_name(b, j, k);
                        insert(
                            thread_id(grandchild_row(b, j, k)),
                            format!("{parent}/{name}"),
                            &parent,
                            Some(&parent_id),
                            name,
                            3,
                        )?;
                    }
                }
                b += 1;
            }
            Ok(())
        })
        .expect("seed tree");
    checkpoint(db);
    eprintln!(
        "seeded {n} threads in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Tree {
        manager_id,
        threads: n,
        full_blocks: n / BLOCK,
    }
}

/// Moves the WAL into the main database file and truncates it.
pub fn checkpoint(db: &BenchDb) {
    if db.store.is_postgres() {
        return;
    }
    let conn = rusqlite::Connection::open(db.store.path()).expect("open for checkpoint");
    conn.busy_timeout(std::time::Duration::from_secs(30))
        .expect("busy timeout");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
}

/// Inserts one live top-level thread `id` at `/root/<name>` in phase `starting`, ready for a
/// `Runtime::launch`.
pub fn insert_live_thread(store: &Store, manager_id: ManagerId, id: &str, name: &str) {
    store
        .write(|tx| {
            insert_thread(
                tx,
                &NewThread {
                    id: ThreadId::new(id),
                    manager_id,
                    path: format!("/root/{name}"),
                    parent_path: Some("/root".to_string()),
                    parent_id: None,
                    name: name.to_string(),
                    task_name: name.to_string(),
                    depth: 1,
                    cwd: "/work/project".to_string(),
                    args: Vec::new(),
                    status: ThreadStatus::Live,
                    phase: Phase::Starting,
                    ..NewThread::default()
                },
            )
        })
        .expect("insert live thread");
}

// ---- the opt-in PostgreSQL runs -----------------------------------------------------------------

/// `$THREADBASE_BENCH_PG`: the server (`postgres://USER@HOST:PORT/DB`) the opt-in PostgreSQL
/// rows run on, else `None` (SQLite rows only).
pub fn pg_url() -> Option<String> {
    std::env::var("THREADBASE_BENCH_PG")
        .ok()
        .filter(|u| !u.trim().is_empty())
}

/// `url` working in schema `schema` (the URL form `--db` takes).
pub fn pg_schema_url(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options=-csearch_path%3D{schema}")
}

/// A plain client of the bench's server, for what the engine does not do: making schemas,
/// bulk copies, counting rows.
pub struct Pg {
    rt: tokio::runtime::Runtime,
    client: tokio_postgres::Client,
}

impl Pg {
    pub fn connect(url: &str) -> Pg {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let client = rt.block_on(async {
            let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .unwrap_or_else(|e| panic!("connect to {url}: {e}"));
            tokio::spawn(async move {
                let _ = conn.await;
            });
            client
        });
        Pg { rt, client }
    }

    pub fn exec(&self, sql: &str) {
        self.rt
            .block_on(self.client.batch_execute(sql))
            .unwrap_or_else(|e| panic!("{e:?}\n{}", &sql[..sql.len().min(2000)]));
    }

    /// The rows of `sql`, every column read as a `T`.
    pub fn rows<T: for<'a> tokio_postgres::types::FromSql<'a>>(&self, sql: &str) -> Vec<Vec<T>> {
        let rows = self
            .rt
            .block_on(self.client.query(sql, &[]))
            .unwrap_or_else(|e| panic!("{e:?}\n{sql}"));
        rows.iter()
            .map(|r| (0..r.len()).map(|i| r.get::<_, T>(i)).collect())
            .collect()
    }
}

/// Drops schema `schema` on the server at `url` (with everything in it), makes it again, and
/// returns the URL that works in it; the engine's migrations run when a store first opens it.
pub fn pg_fresh_schema(url: &str, schema: &str) -> String {
    Pg::connect(url).exec(&format!(
        "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema};"
    ));
    pg_schema_url(url, schema)
}

/// Like [`open_db`], on a fresh schema `schema` of the PostgreSQL server at `url`.
pub fn open_db_pg(url: &str, schema: &str) -> BenchDb {
    let dir = tempfile::Builder::new()
        .prefix("threadbase-bench-")
        .tempdir()
        .expect("temp dir");
    let location = pg_fresh_schema(url, schema);
    let store = Store::open(&location).expect("open store");
    let manager_id = add_manager(&store);
    BenchDb {
        store,
        location,
        manager_id,
        _dir: dir,
    }
}

/// The client side of a program that answers JSON request lines on its stdout (`threadbase
/// serve`, or the serve bench's echo program): one request at a time, its response read back by
/// id, notifications skipped. The serve and team benches drive serves through it.
pub struct Pipe {
    stdin: Option<std::process::ChildStdin>,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    line: Vec<u8>,
    request: String,
    next_id: u64,
    /// Where the program's stderr went, said when it closes its stdout early.
    log: String,
}

impl Pipe {
    /// Takes `child`'s piped stdin and stdout; `log` names where its stderr goes.
    pub fn new(child: &mut std::process::Child, log: impl std::fmt::Display) -> Pipe {
        Pipe {
            stdin: child.stdin.take(),
            stdout: std::io::BufReader::with_capacity(1 << 20, child.stdout.take().unwrap()),
            line: Vec::with_capacity(1 << 16),
            request: String::with_capacity(1024),
            next_id: 1,
            log: log.to_string(),
        }
    }

    /// Writes one request and reads up to its response line; returns that line, without its
    /// LF.
    pub fn roundtrip(&mut self, method: &str, params: &str) -> &[u8] {
        use std::fmt::Write as _;
        use std::io::{BufRead, Write};
        let id = self.next_id;
        self.next_id += 1;
        self.request.clear();
        let _ = writeln!(
            self.request,
            "{{\"id\":{id},\"method\":\"{method}\",\"params\":{params}}}"
        );
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(self.request.as_bytes()).unwrap();
        stdin.flush().unwrap();
        // `{"id":N,` on the stack: this runs once per measured request.
        let mut prefix = [0u8; 32];
        let mut w = &mut prefix[..];
        write!(w, "{{\"id\":{id},").unwrap();
        let plen = 32 - w.len();
        loop {
            self.line.clear();
            let got = self.stdout.read_until(b'\n', &mut self.line).unwrap();
            assert!(got > 0, "the program closed its stdout (see {})", self.log);
            if self.line.starts_with(&prefix[..plen]) {
                self.line.pop();
                return &self.line;
            }
        }
    }

    /// Whether a line [`Pipe::roundtrip`] returned is an error response (its first member
    /// after the id is `error`).
    pub fn is_error(line: &[u8]) -> bool {
        line.iter()
            .position(|b| *b == b',')
            .is_some_and(|comma| line[comma + 1..].starts_with(b"\"error\""))
    }

    /// One request whose result must not be an error; returns the parsed result.
    pub fn call(&mut self, method: &str, params: &serde_json::Value) -> serde_json::Value {
        let line = self.roundtrip(method, &params.to_string());
        let mut v: serde_json::Value = serde_json::from_slice(line).expect("a JSON response line");
        assert!(
            v.get("error").is_none(),
            "{method} {params} failed: {}",
            v["error"]
        );
        v["result"].take()
    }

    /// Closes the program's stdin (serve stops its children and exits).
    pub fn close_stdin(&mut self) {
        drop(self.stdin.take());
    }

    /// Reads what is left of the program's stdout, until it closes.
    pub fn drain(&mut self) {
        let _ = std::io::Read::read_to_end(&mut self.stdout, &mut Vec::new());
    }
}
