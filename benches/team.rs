//! A team under load (issue 46, item 9): `N` `threadbase serve`s on `K` hosts share one
//! database, each supervising streaming scripted children, each driven by a closed-loop client.
//! Not a criterion bench (`harness = false` and no criterion): a closed loop's figure is a
//! throughput and a latency distribution of the whole team over a stretch of time, not the cost
//! of one repeated iteration, so the bench runs each configuration once and prints a row.
//!
//! # The load
//!
//! - **Hosts.** With `unshare --pid --fork --mount-proc` available (root), each host is a PID
//!   namespace of its own (a `sleep` as its pid 1) and every serve of that host runs inside it
//!   through `nsenter --pid --mount`: the hosts' pids collide on purpose. Every serve also gets
//!   `THREADBASE_HOST_ID=host-<k>` (the namespaces share the machine id). Without namespaces the
//!   serves of a host are plain processes with that host id only, and the row says so. Serve `i`
//!   runs on host `i mod K`. A SQLite row runs every serve on one host (a SQLite file is one
//!   machine's, as in the issue's row).
//! - **Serves.** `threadbase --db DB serve --session-id ses_<i> --cwd DIR`, each with its own
//!   stdin/stdout pipes to this bench and its stderr in `DIR/serve_<i>.log`. Serve 0 starts first
//!   and answers a `list` (it migrates a fresh database) before the others start.
//! - **Children.** Each serve starts `T` threads (`thread start`) of the built-in scripted agent
//!   (`threadbase scripted-agent`, [`script`]) whose every turn streams 415 events over about
//!   3.2 s: 8 assistant messages of 35 text deltas 10 ms apart, each calling a tool (2 updates,
//!   50 ms), then a closing message. The script has [`TURNS`] such turns, so every `send` (a
//!   `follow_up` while the thread is busy, delivered as one batch when its run would stop)
//!   starts another streaming turn: a thread the client keeps sending to streams without pause.
//! - **Clients.** One thread per serve, closed loop, one request at a time: a cycle of 10
//!   requests, `poll` ×8 (the serve's threads in turn, by id, summary detail), one `send`
//!   (`message`, default mode) and one `list` (this session's threads). A request's latency is
//!   from its line written to its response line read (notifications skipped).
//!
//! After a warm-up, requests that start within the measured window count. The row gives
//! polls/s team-wide (polls answered in the window ÷ the window), p50/p99 of poll, send and list,
//! errors (responses with `error`), the thread events recorded per second (the threads'
//! `last_seq` moved: Pi's text deltas fold into their message, so a turn's 415 child events are
//! about 34 recorded ones), and the machine's CPU busy share, with the shares of this row's
//! serves, of their children and of every `postgres` process (CPU time of processes that ended in
//! the window is missed). On PostgreSQL also:
//!
//! - **write txn/s**: how far `pg_snapshot_xmax(pg_current_snapshot())` (the next transaction
//!   id; only a transaction that writes takes one) moved in the window. The counter is the
//!   server's, so other clients of the same server count too; `commits/s` beside it is
//!   `pg_stat_database.xact_commit` of the bench's own database (read-only transactions too).
//! - **lock held**: a connection of its own samples `pg_locks` every 10 ms (advisory locks of
//!   the bench's database): the share of samples in which any advisory lock was granted, and the
//!   mean number of advisory lock requests waiting. (Before issue 46 every write took one global
//!   advisory lock; now a write takes its tree's, so this is across all of them.) Beside it, the
//!   mean number of requests for any other lock waiting, server-wide: a commit that sent a
//!   `NOTIFY` takes PostgreSQL's one notification queue lock (an `object` lock of database 0)
//!   and holds it through its WAL flush.
//!
//! A PostgreSQL row runs in a fresh database, `threadbase_team_bench` on the given server
//! (dropped with `WITH (FORCE)` and made again before the row, dropped after it), so nothing
//! from another run or test is in it and its locks and commits are told apart from theirs. The
//! server needs about 10 connections per serve at most (the pool's ceiling) plus two; the bench
//! prints a warning when `max_connections` leaves less free.
//!
//! # Delay proxy
//!
//! With `THREADBASE_BENCH_DELAY_MS=D` a PostgreSQL row's serves connect through a loopback TCP
//! proxy in this bench that forwards to the server and delays every chunk, in each direction,
//! by `D / 2` (a delay, not a throttle: each direction is a queue of timestamped chunks, written
//! in order once due). Its delay is calibrated before the serves start: `SELECT 1` (median of
//! 50, simple protocol: one round trip) through it should take `D`, the proxy's own thread hops
//! and the server's answer included; the delay is corrected up to three times. The round trip
//! measured after, and the direct one, are printed beside the row (`rtt`). The bench's own
//! sampling connection goes straight to the server.
//!
//! # Knobs
//!
//! - `THREADBASE_BENCH_TEAM=18x3x3[,6x3x3…]`: serves × threads per serve × hosts (default
//!   `18x3x3`).
//! - `THREADBASE_BENCH_STORE=sqlite[,postgres://USER@HOST:PORT/DB…]`: the stores, one row each
//!   (default `sqlite`). A PostgreSQL user must be allowed to create databases.
//! - `THREADBASE_BENCH_DELAY_MS=2.8`: the proxy's added round trip for PostgreSQL rows (default
//!   none: serves connect straight to the server).
//! - `THREADBASE_BENCH_SECS=20` (measured window) and `THREADBASE_BENCH_WARMUP_SECS=5`.
//! - `THREADBASE_BENCH_BIN=PATH[,PATH…]`: the builds of `threadbase` measured, each row run
//!   with each build back to back (`this`, or nothing, is the release build cargo made for this
//!   bench). Only flags every build since issue 32 has are used.
//! - `THREADBASE_BENCH_DIR=DIR`: where each row's folder goes (default `target/team-bench/`).
//!
//! A row's figures are printed as a markdown table row as soon as it ends, the table again at
//! the end, and each row's JSON written to `target/criterion/team/<row>.json`. The README's
//! "Team load" table came from
//!
//! ```text
//! THREADBASE_BENCH_STORE=sqlite,postgres://threadbase@127.0.0.1:PORT/threadbase_test \
//!     cargo bench --bench team
//! THREADBASE_BENCH_TEAM=6x3x3 THREADBASE_BENCH_DELAY_MS=2.8 \
//!     THREADBASE_BENCH_STORE=postgres://threadbase@127.0.0.1:PORT/threadbase_test \
//!     cargo bench --bench team
//! ```
//!
//! Every process the bench starts is in a process group of its own and gets SIGKILL when the
//! bench ends, panics or is killed (`PR_SET_PDEATHSIG`; a serve whose stdin closes stops its
//! children, and a host's namespace dies with its pid 1).

#[path = "../tests/it/support/serve_env.rs"]
mod serve_env;
mod support;

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Script turns: each `send` consumes at most one, so this outlasts any run.
const TURNS: usize = 400;
/// The request cycle of a client: `p` poll, `s` send, `l` list.
const CYCLE: &[u8] = b"ppppsppppl";
/// The fresh database a PostgreSQL row runs in.
const PG_DATABASE: &str = "threadbase_team_bench";
/// How often the lock sampler looks at `pg_locks`.
const LOCK_SAMPLE: Duration = Duration::from_millis(10);

// ---- knobs ------------------------------------------------------------------------------------

fn knob(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

#[derive(Clone, Copy, Debug)]
struct Team {
    serves: usize,
    threads: usize,
    hosts: usize,
}

impl Team {
    fn parse(text: &str) -> Team {
        let n: Vec<usize> = text
            .trim()
            .split(['x', '×'])
            .map(|p| p.trim().parse().ok().filter(|&n| n > 0))
            .collect::<Option<_>>()
            .unwrap_or_default();
        match n[..] {
            [serves, threads, hosts] => Team {
                serves,
                threads,
                hosts,
            },
            _ => panic!("THREADBASE_BENCH_TEAM: {text:?} is not serves×threads×hosts (say 18x3x3)"),
        }
    }

    fn label(&self) -> String {
        format!("{}x{}x{}", self.serves, self.threads, self.hosts)
    }
}

#[derive(Clone, Debug)]
enum Store {
    Sqlite,
    Postgres(String),
}

/// A measured build: its path and how the table names it.
#[derive(Clone, Debug)]
struct Build {
    path: String,
    label: String,
}

fn builds() -> Vec<Build> {
    let own = env!("CARGO_BIN_EXE_threadbase").to_string();
    let list = knob("THREADBASE_BENCH_BIN").unwrap_or_else(|| "this".into());
    list.split(',')
        .map(str::trim)
        .map(|p| {
            if p.is_empty() || p == "this" {
                Build {
                    path: own.clone(),
                    label: "this".into(),
                }
            } else {
                assert!(
                    Path::new(p).is_file(),
                    "THREADBASE_BENCH_BIN: {p} is not a file"
                );
                Build {
                    path: p.to_string(),
                    label: p.to_string(),
                }
            }
        })
        .collect()
}

fn secs(name: &str, default: f64) -> Duration {
    let s = knob(name).map_or(default, |t| {
        t.parse()
            .unwrap_or_else(|_| panic!("{name}={t:?}: a number of seconds"))
    });
    Duration::from_secs_f64(s)
}

fn delay() -> Option<Duration> {
    let ms: f64 = knob("THREADBASE_BENCH_DELAY_MS")?
        .parse()
        .expect("THREADBASE_BENCH_DELAY_MS: a round trip in milliseconds, say 2.8");
    (ms > 0.0).then(|| Duration::from_secs_f64(ms / 1e3))
}

fn bench_root() -> PathBuf {
    knob("THREADBASE_BENCH_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target/team-bench"),
        PathBuf::from,
    )
}

// ---- the script -------------------------------------------------------------------------------

/// One turn: 8 messages of 35 text deltas (10 ms apart) and a tool call (2 updates, 50 ms),
/// then a closing message of 2 deltas: 415 events as the scripted agent writes them (with the
/// prompt's `agent_start`, user message and the run's end).
fn script() -> Value {
    let mut turn = Vec::new();
    for i in 0..8 {
        turn.push(json!({
            "text": format!("Reading part {i} of the module to see what each function does and whether a test covers it. "),
            "deltas": 35,
            "delta_delay_ms": 10,
        }));
        turn.push(json!({
            "tool": "bash",
            "args": {"command": format!("sed -n {},{}p src/lib.rs", i * 40 + 1, i * 40 + 40)},
            "result": "fn covered() {}\n".repeat(40),
            "updates": 2,
            "duration_ms": 50,
        }));
    }
    turn.push(json!({"text": "Done: every part is covered.", "deltas": 2, "delta_delay_ms": 10}));
    json!({"turns": vec![Value::Array(turn); TURNS]})
}

// ---- processes --------------------------------------------------------------------------------

/// Process groups to SIGKILL when the bench ends or unwinds.
#[derive(Default)]
struct Reaper {
    groups: Mutex<Vec<i32>>,
}

impl Reaper {
    fn add(&self, child: &Child) {
        self.groups.lock().unwrap().push(child.id() as i32);
    }

    fn kill_all(&self) {
        for g in self.groups.lock().unwrap().drain(..) {
            // SAFETY: kill(2) with a negative pid signals that process group; nothing else.
            unsafe {
                libc::kill(-g, libc::SIGKILL);
            }
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// `cmd` in a process group of its own (so the group can be killed whole), killed when this
/// bench dies.
fn own_group(cmd: &mut Command) -> &mut Command {
    cmd.process_group(0);
    // SAFETY: prctl is async-signal-safe; the closure touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd
}

/// Whether `unshare --pid --fork --mount-proc` works here (it needs root).
fn pid_namespaces() -> bool {
    Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
        && Command::new("nsenter")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// A host: its id and, with namespaces, its namespace's pid 1 as this bench sees it.
struct Host {
    id: String,
    init: Option<u32>,
    holder: Option<Child>,
}

impl Host {
    fn start(k: usize, namespace: bool, reaper: &Reaper) -> Host {
        let id = format!("host-{k}");
        if !namespace {
            return Host {
                id,
                init: None,
                holder: None,
            };
        }
        let mut cmd = Command::new("unshare");
        cmd.args([
            "--pid",
            "--fork",
            "--mount-proc",
            "--kill-child",
            "sleep",
            "infinity",
        ])
        .stdin(Stdio::null());
        let holder = own_group(&mut cmd)
            .spawn()
            .expect("unshare a host's namespace");
        reaper.add(&holder);
        let children = format!("/proc/{0}/task/{0}/children", holder.id());
        let deadline = Instant::now() + Duration::from_secs(10);
        let init = loop {
            let text = std::fs::read_to_string(&children).unwrap_or_default();
            if let Some(pid) = text.split_whitespace().next() {
                break pid.parse().unwrap();
            }
            assert!(Instant::now() < deadline, "{id}: no pid 1 in its namespace");
            std::thread::sleep(Duration::from_millis(5));
        };
        Host {
            id,
            init: Some(init),
            holder: Some(holder),
        }
    }
}

/// A serve driven over its pipes, one request at a time.
struct Serve {
    child: Child,
    pipe: support::Pipe,
}

struct Place<'a> {
    bin: &'a str,
    db: &'a str,
    dir: &'a Path,
    script: &'a Path,
}

impl Serve {
    fn start(place: &Place<'_>, i: usize, host: &Host, reaper: &Reaper) -> Serve {
        let mut cmd = match host.init {
            Some(init) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--target={init}"))
                    .args(["--pid", "--mount"])
                    .arg(format!("--wd={}", place.dir.display()))
                    .arg("--")
                    .arg(place.bin);
                c
            }
            None => Command::new(place.bin),
        };
        let log = place.dir.join(format!("serve_{i}.log"));
        cmd.args(["--db", place.db, "serve", "--session-id"])
            .arg(format!("ses_{i}"))
            .arg("--cwd")
            .arg(place.dir)
            .current_dir(place.dir);
        for k in serve_env::INHERITED {
            cmd.env_remove(k);
        }
        cmd.env(
            "THREADBASE_PI_COMMAND",
            json!([place.bin, "scripted-agent", "--script", place.script]).to_string(),
        )
        .env("PI_CODING_AGENT_DIR", place.dir.join("agent"))
        .env("THREADBASE_HOST_ID", &host.id)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap());
        let mut child = own_group(&mut cmd).spawn().expect("spawn serve");
        reaper.add(&child);
        Serve {
            pipe: support::Pipe::new(&mut child, log.display()),
            child,
        }
    }

    /// One request; whether its response was an error.
    fn roundtrip(&mut self, method: &str, params: &str) -> bool {
        support::Pipe::is_error(self.pipe.roundtrip(method, params))
    }

    fn call(&mut self, params: Value) -> Value {
        self.pipe.call("thread", &params)
    }

    /// Closes stdin (serve stops its children and exits) and waits up to `within`.
    fn close(&mut self, within: Duration) {
        self.pipe.close_stdin();
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// One direction's chunks, each with the time it is due, and whether its reader ended.
type Chunks = (VecDeque<(Instant, Vec<u8>)>, bool);

// ---- the delay proxy --------------------------------------------------------------------------

/// A loopback proxy to `upstream` that delays each chunk by `one_way` in each direction.
struct Proxy {
    port: u16,
    stop: Arc<AtomicBool>,
    /// The delay each direction adds, in ns (calibrated once started: see [`Proxy::calibrate`]).
    one_way: Arc<AtomicU64>,
}

impl Proxy {
    fn start(upstream: String, one_way: Duration) -> Proxy {
        let one_way = Arc::new(AtomicU64::new(one_way.as_nanos() as u64));
        let delay = one_way.clone();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(client) = conn else { continue };
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (Ok(c), Ok(s)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                Proxy::pipe(c, s, delay.clone());
                Proxy::pipe(server, client, delay.clone());
            }
        });
        Proxy {
            port,
            stop,
            one_way,
        }
    }

    /// Sets the delay so that `SELECT 1` through the proxy at `url` takes `rtt` (the proxy's
    /// own hops and the server's answer come off it); returns (through, direct) as measured
    /// after.
    fn calibrate(&self, url: &str, direct_url: &str, rtt: Duration) -> (Duration, Duration) {
        let direct = select_1_rtt(direct_url);
        for _ in 0..3 {
            let through = select_1_rtt(url);
            let off = through.as_nanos() as i64 - rtt.as_nanos() as i64;
            if off.unsigned_abs() < 20_000 {
                break;
            }
            let now = self.one_way.load(Ordering::Relaxed) as i64;
            self.one_way
                .store((now - off / 2).max(0) as u64, Ordering::Relaxed);
        }
        (select_1_rtt(url), direct)
    }

    /// Forwards `from` to `to`, each chunk written `one_way` after it was read, in order.
    fn pipe(mut from: TcpStream, mut to: TcpStream, one_way: Arc<AtomicU64>) {
        let queue: Arc<(Mutex<Chunks>, Condvar)> = Arc::default();
        let q = queue.clone();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = from.read(&mut buf).unwrap_or(0);
                let (lock, cv) = &*q;
                let mut state = lock.lock().unwrap();
                if n == 0 {
                    state.1 = true;
                    cv.notify_one();
                    return;
                }
                let due = Instant::now() + Duration::from_nanos(one_way.load(Ordering::Relaxed));
                state.0.push_back((due, buf[..n].to_vec()));
                cv.notify_one();
            }
        });
        std::thread::spawn(move || {
            // A sleep ends up to the timer slack (50 µs by default) late: ask for 1 µs.
            // SAFETY: prctl on the calling thread only.
            unsafe {
                libc::prctl(libc::PR_SET_TIMERSLACK, 1usize);
            }
            loop {
                let (lock, cv) = &*queue;
                let mut state = lock.lock().unwrap();
                while state.0.is_empty() && !state.1 {
                    state = cv.wait(state).unwrap();
                }
                let Some((due, chunk)) = state.0.pop_front() else {
                    let _ = to.shutdown(std::net::Shutdown::Write);
                    return;
                };
                drop(state);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                if to.write_all(&chunk).is_err() {
                    return;
                }
            }
        });
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

// ---- PostgreSQL URLs --------------------------------------------------------------------------

/// `url` split as (`postgres://user@`, `host:port`, database, `?query` or empty).
fn split_url(url: &str) -> (String, String, String, String) {
    let (scheme, rest) = url
        .split_once("://")
        .unwrap_or_else(|| panic!("{url}: not a postgres:// URL"));
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, format!("?{q}")),
        None => (rest, String::new()),
    };
    let (authority, db) = rest.split_once('/').unwrap_or((rest, ""));
    let (user, hostport) = match authority.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), authority),
    };
    (
        format!("{scheme}://{user}"),
        hostport.to_string(),
        db.to_string(),
        query,
    )
}

fn with_database(url: &str, db: &str) -> String {
    let (head, hostport, _, query) = split_url(url);
    format!("{head}{hostport}/{db}{query}")
}

fn with_hostport(url: &str, hostport: &str) -> String {
    let (head, _, db, query) = split_url(url);
    format!("{head}{hostport}/{db}{query}")
}

/// Median round trip of `SELECT 1` (simple protocol: one round trip) on `url`.
fn select_1_rtt(url: &str) -> Duration {
    let pg = support::Pg::connect(url);
    pg.exec("SELECT 1");
    let mut t: Vec<Duration> = (0..50)
        .map(|_| {
            let start = Instant::now();
            pg.exec("SELECT 1");
            start.elapsed()
        })
        .collect();
    t.sort();
    t[t.len() / 2]
}

// ---- one row ----------------------------------------------------------------------------------

/// What one kind of request measured.
#[derive(Default)]
struct Op {
    ns: Vec<u64>,
    errors: usize,
}

impl Op {
    fn merge(&mut self, other: Op) {
        self.ns.extend(other.ns);
        self.errors += other.errors;
    }

    fn pct(&mut self, q: f64) -> f64 {
        if self.ns.is_empty() {
            return f64::NAN;
        }
        self.ns.sort_unstable();
        self.ns[((self.ns.len() - 1) as f64 * q).round() as usize] as f64 / 1e6
    }
}

#[derive(Default)]
struct Ops {
    poll: Op,
    send: Op,
    list: Op,
}

/// What the sampler saw in the window.
#[derive(Default, Clone, Copy)]
struct Sampled {
    samples: u64,
    held: u64,
    waiting: u64,
    /// Requests for any other lock waiting (summed over samples).
    other_waiting: u64,
    xids: Option<i64>,
    commits: Option<i64>,
    events: i64,
    cpu_busy: f64,
    /// Shares of the machine's CPU time in the window: this row's serves, their children,
    /// every `postgres` process.
    cpu_serves: f64,
    cpu_agents: f64,
    cpu_postgres: f64,
}

fn ms(v: f64) -> String {
    if v.is_nan() {
        "–".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// CPU ticks so far of this row's serves, of their scripted children (both told by their cwd,
/// `dir`) and of every `postgres` process.
fn cpu_by_kind(dir: &Path) -> [u64; 3] {
    let mut t = [0u64; 3];
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return t;
    };
    for p in procs.flatten() {
        let name = p.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(p.path().join("stat")) else {
            continue;
        };
        // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0);
        let kind = if head.ends_with("(postgres") {
            2
        } else if std::fs::read_link(p.path().join("cwd")).is_ok_and(|c| c.starts_with(dir)) {
            let cmd = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
            if memchr_find(&cmd, b"scripted-agent") {
                1
            } else if memchr_find(&cmd, b"serve") {
                0
            } else {
                continue;
            }
        } else {
            continue;
        };
        t[kind] += ticks;
    }
    t
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The machine's (busy, total) jiffies so far.
fn cpu_jiffies() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// The counters read at the window's edges: (next xid, commits, events recorded: the sum of
/// the threads' `last_seq`; `thread_events` keeps only each thread's latest rows).
fn counters(pg: Option<&support::Pg>, sqlite: Option<&Path>) -> (Option<i64>, Option<i64>, i64) {
    match (pg, sqlite) {
        (Some(pg), _) => {
            let r = pg.rows::<i64>(
                "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::int8,
                        (SELECT xact_commit FROM pg_stat_database
                         WHERE datname = current_database()),
                        (SELECT coalesce(sum(last_seq), 0)::int8 FROM threads)",
            );
            (Some(r[0][0]), Some(r[0][1]), r[0][2])
        }
        (None, Some(db)) => {
            let conn = rusqlite::Connection::open_with_flags(
                db,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .unwrap();
            conn.busy_timeout(Duration::from_secs(10)).unwrap();
            let n = conn
                .query_row("SELECT coalesce(sum(last_seq), 0) FROM threads", [], |r| {
                    r.get(0)
                })
                .unwrap();
            (None, None, n)
        }
        (None, None) => (None, None, 0),
    }
}

/// Samples the window: counters at both edges, and (on PostgreSQL) the advisory locks every
/// [`LOCK_SAMPLE`].
fn sample(
    pg_url: Option<&str>,
    sqlite: Option<&Path>,
    dir: &Path,
    from: Instant,
    until: Instant,
) -> Sampled {
    let pg = pg_url.map(support::Pg::connect);
    // Advisory locks of the bench's database, and any other lock waited for: PostgreSQL's
    // NOTIFY takes one cluster-wide lock (an `object` lock of database 0) at commit.
    let locks = "SELECT count(*) FILTER (WHERE advisory AND granted),
                        count(*) FILTER (WHERE advisory AND NOT granted),
                        count(*) FILTER (WHERE NOT advisory AND NOT granted)
                 FROM (SELECT granted, locktype = 'advisory' AND database =
                              (SELECT oid FROM pg_database WHERE datname = current_database())
                              AS advisory
                       FROM pg_locks WHERE locktype <> 'advisory' OR database =
                              (SELECT oid FROM pg_database WHERE datname = current_database())) l";
    let mut s = Sampled::default();
    if let Some(d) = from.checked_duration_since(Instant::now()) {
        std::thread::sleep(d);
    }
    let (x0, c0, e0) = counters(pg.as_ref(), sqlite);
    let cpu0 = cpu_jiffies();
    let kinds0 = cpu_by_kind(dir);
    while Instant::now() < until {
        let next = Instant::now() + LOCK_SAMPLE;
        if let Some(pg) = &pg {
            let r = pg.rows::<i64>(locks);
            s.samples += 1;
            s.held += u64::from(r[0][0] > 0);
            s.waiting += r[0][1] as u64;
            s.other_waiting += r[0][2] as u64;
        }
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d.min(until.saturating_duration_since(Instant::now())));
        }
    }
    let (x1, c1, e1) = counters(pg.as_ref(), sqlite);
    let cpu1 = cpu_jiffies();
    let kinds1 = cpu_by_kind(dir);
    s.xids = x0.zip(x1).map(|(a, b)| b - a);
    s.commits = c0.zip(c1).map(|(a, b)| b - a);
    s.events = e1 - e0;
    let total = (cpu1.1 - cpu0.1).max(1) as f64;
    s.cpu_busy = (cpu1.0 - cpu0.0) as f64 / total;
    let share = |k: usize| kinds1[k].saturating_sub(kinds0[k]) as f64 / total;
    (s.cpu_serves, s.cpu_agents, s.cpu_postgres) = (share(0), share(1), share(2));
    s
}

/// One client's closed loop over its serve's threads until `until`; requests that start in
/// `[from, until)` count.
fn drive(serve: &mut Serve, threads: &[String], from: Instant, until: Instant) -> Ops {
    let polls: Vec<String> = threads
        .iter()
        .map(|t| json!({"action": "poll", "id": t}).to_string())
        .collect();
    let sends: Vec<String> = threads
        .iter()
        .map(|t| {
            json!({"action": "send", "id": t, "message": "Go on with the next part."}).to_string()
        })
        .collect();
    let list = json!({"action": "list"}).to_string();
    let mut ops = Ops::default();
    let (mut p, mut s) = (0usize, 0usize);
    for i in 0.. {
        let start = Instant::now();
        if start >= until {
            break;
        }
        let (op, failed) = match CYCLE[i % CYCLE.len()] {
            b'p' => {
                p += 1;
                let f = serve.roundtrip("thread", &polls[p % polls.len()]);
                (&mut ops.poll, f)
            }
            b's' => {
                s += 1;
                let f = serve.roundtrip("thread", &sends[s % sends.len()]);
                (&mut ops.send, f)
            }
            _ => {
                let f = serve.roundtrip("thread", &list);
                (&mut ops.list, f)
            }
        };
        if start >= from {
            op.ns.push(start.elapsed().as_nanos() as u64);
            op.errors += usize::from(failed);
        }
    }
    ops
}

struct Row {
    build: String,
    team: Team,
    store: String,
    hosts: String,
    rtt: Option<(Duration, Duration)>,
    window: Duration,
    ops: Ops,
    sampled: Sampled,
}

impl Row {
    fn key(&self) -> String {
        let build = if self.build == "this" {
            "this".to_string()
        } else {
            format!("bin{:08x}", fnv(&self.build))
        };
        format!(
            "{}-{}-{build}",
            self.team.label(),
            self.store.replace([' ', '/', ':'], "_")
        )
    }

    fn markdown(&mut self) -> String {
        let w = self.window.as_secs_f64();
        let s = self.sampled;
        let polls = self.ops.poll.ns.len() as f64 / w;
        let errors = self.ops.poll.errors + self.ops.send.errors + self.ops.list.errors;
        let (pp50, pp99) = (self.ops.poll.pct(0.5), self.ops.poll.pct(0.99));
        let (sp50, sp99) = (self.ops.send.pct(0.5), self.ops.send.pct(0.99));
        let (lp50, lp99) = (self.ops.list.pct(0.5), self.ops.list.pct(0.99));
        let writes = match (s.xids, s.commits) {
            (Some(x), Some(c)) => format!("{:.0} ({:.0} commits/s)", x as f64 / w, c as f64 / w),
            _ => "–".into(),
        };
        let lock = if s.samples > 0 {
            format!(
                "{:.0} %, {:.1} waiting ({:.1} on other locks)",
                100.0 * s.held as f64 / s.samples as f64,
                s.waiting as f64 / s.samples as f64,
                s.other_waiting as f64 / s.samples as f64
            )
        } else {
            "–".into()
        };
        let mut notes = format!(
            "{}; cpu {:.0} % (serves {:.0}, children {:.0}, postgres {:.0})",
            self.hosts,
            100.0 * s.cpu_busy,
            100.0 * s.cpu_serves,
            100.0 * s.cpu_agents,
            100.0 * s.cpu_postgres
        );
        if let Some((through, direct)) = self.rtt {
            let _ = write!(
                notes,
                "; rtt {:.2} ms (direct {:.2})",
                through.as_secs_f64() * 1e3,
                direct.as_secs_f64() * 1e3
            );
        }
        if errors > 0 {
            let _ = write!(
                notes,
                "; errors: poll {}, send {}, list {}",
                self.ops.poll.errors, self.ops.send.errors, self.ops.list.errors
            );
        }
        format!(
            "| {} | {} × {}, {} hosts | {} | {:.0} | {} / {} ms | {} / {} ms | {} / {} ms | {} | {} | {:.0} | {} |",
            self.build,
            self.team.serves,
            self.team.threads,
            self.team.hosts,
            self.store,
            polls,
            ms(pp50),
            ms(pp99),
            ms(sp50),
            ms(sp99),
            ms(lp50),
            ms(lp99),
            writes,
            lock,
            s.events as f64 / w,
            notes
        )
    }

    fn json(&mut self) -> Value {
        let w = self.window.as_secs_f64();
        let s = self.sampled;
        let op = |o: &mut Op| {
            json!({"count": o.ns.len(), "per_s": o.ns.len() as f64 / w, "errors": o.errors,
                   "p50_ms": o.pct(0.5), "p99_ms": o.pct(0.99)})
        };
        json!({
            "build": self.build,
            "serves": self.team.serves,
            "threads_per_serve": self.team.threads,
            "hosts": self.team.hosts,
            "hosts_how": self.hosts,
            "store": self.store,
            "window_s": w,
            "poll": op(&mut self.ops.poll),
            "send": op(&mut self.ops.send),
            "list": op(&mut self.ops.list),
            "write_txn_per_s": s.xids.map(|x| x as f64 / w),
            "commits_per_s": s.commits.map(|c| c as f64 / w),
            "lock_samples": s.samples,
            "lock_held_share": (s.samples > 0).then(|| s.held as f64 / s.samples as f64),
            "lock_waiting_mean": (s.samples > 0).then(|| s.waiting as f64 / s.samples as f64),
            "other_locks_waiting_mean":
                (s.samples > 0).then(|| s.other_waiting as f64 / s.samples as f64),
            "events_per_s": s.events as f64 / w,
            "cpu_busy_share": s.cpu_busy,
            "cpu_serves_share": s.cpu_serves,
            "cpu_children_share": s.cpu_agents,
            "cpu_postgres_share": s.cpu_postgres,
            "rtt_ms": self.rtt.map(|r| r.0.as_secs_f64() * 1e3),
            "rtt_direct_ms": self.rtt.map(|r| r.1.as_secs_f64() * 1e3),
        })
    }
}

fn fnv(s: &str) -> u32 {
    s.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

fn run_row(build: &Build, team: Team, store: &Store, namespaces: bool) -> Row {
    let reaper = Reaper::default();
    let team = match store {
        // A SQLite file is one machine's: every serve on one host, as in the issue's row.
        Store::Sqlite => Team { hosts: 1, ..team },
        Store::Postgres(_) => team,
    };
    let store_label = match store {
        Store::Sqlite => "SQLite".to_string(),
        Store::Postgres(_) => match delay() {
            Some(d) => format!("PostgreSQL + {:.1} ms proxy", d.as_secs_f64() * 1e3),
            None => "PostgreSQL, loopback".to_string(),
        },
    };
    let dir = bench_root().join(format!(
        "{}-{}-{:08x}",
        team.label(),
        if matches!(store, Store::Sqlite) {
            "sqlite"
        } else {
            "pg"
        },
        fnv(&build.path)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let dir = dunce::canonicalize(&dir).unwrap();
    let script_path = dir.join("script.json");
    std::fs::write(&script_path, script().to_string()).unwrap();

    // The database, and the URL the serves are given.
    let mut proxy = None;
    let mut rtt = None;
    let (db, pg_url) = match store {
        Store::Sqlite => (dir.join("team.sqlite").display().to_string(), None),
        Store::Postgres(url) => {
            let admin = support::Pg::connect(url);
            admin.exec(&format!(
                "DROP DATABASE IF EXISTS {PG_DATABASE} WITH (FORCE)"
            ));
            admin.exec(&format!("CREATE DATABASE {PG_DATABASE}"));
            let r = admin.rows::<i64>(
                "SELECT current_setting('max_connections')::int8,
                        (SELECT count(*) FROM pg_stat_activity)",
            );
            let free = r[0][0] - r[0][1];
            let need = 10 * team.serves as i64 + 2;
            if free < need {
                eprintln!(
                    "team bench: warning: the server has {free} connections free and the serves may take up to {need}"
                );
            }
            let direct = with_database(url, PG_DATABASE);
            let serve_url = match delay() {
                Some(d) => {
                    let (_, hostport, _, _) = split_url(&direct);
                    assert!(
                        !hostport.is_empty() && !hostport.contains('/'),
                        "THREADBASE_BENCH_DELAY_MS needs a host:port URL (TCP), not {url}"
                    );
                    let upstream = if hostport.contains(':') {
                        hostport
                    } else {
                        format!("{hostport}:5432")
                    };
                    let p = Proxy::start(upstream, d / 2);
                    let through = with_hostport(&direct, &format!("127.0.0.1:{}", p.port));
                    rtt = Some(p.calibrate(&through, &direct, d));
                    proxy = Some(p);
                    through
                }
                None => direct.clone(),
            };
            (serve_url, Some(direct))
        }
    };
    let hosts_how = if namespaces && team.hosts > 1 {
        format!("{} PID namespaces", team.hosts)
    } else if team.hosts > 1 {
        format!(
            "{} host ids, one PID namespace (no `unshare` here)",
            team.hosts
        )
    } else {
        "one host".to_string()
    };
    let mut hosts: Vec<Host> = (0..team.hosts)
        .map(|k| Host::start(k, namespaces && team.hosts > 1, &reaper))
        .collect();
    let place = Place {
        bin: &build.path,
        db: &db,
        dir: &dir,
        script: &script_path,
    };
    eprintln!(
        "team bench: {} on {store_label} with {} ({hosts_how}), folder {}",
        team.label(),
        build.label,
        dir.display()
    );
    // Serve 0 first: it migrates a fresh database.
    let mut serves = vec![Serve::start(&place, 0, &hosts[0], &reaper)];
    serves[0].call(json!({"action": "list"}));
    for i in 1..team.serves {
        serves.push(Serve::start(&place, i, &hosts[i % team.hosts], &reaper));
    }
    let warmup = secs("THREADBASE_BENCH_WARMUP_SECS", 5.0);
    let window = secs("THREADBASE_BENCH_SECS", 20.0);
    let started = Instant::now();
    // Each serve starts its threads, then its client runs; the window opens once all have
    // started theirs and warmed up.
    let ready = Arc::new(std::sync::Barrier::new(team.serves + 1));
    let go = Arc::new(std::sync::Barrier::new(team.serves + 1));
    let edges: Arc<Mutex<Option<(Instant, Instant)>>> = Arc::default();
    let (ops, sampled) = std::thread::scope(|scope| {
        let clients: Vec<_> = serves
            .iter_mut()
            .map(|serve| {
                let ready = ready.clone();
                let go = go.clone();
                let edges = edges.clone();
                scope.spawn(move || {
                    let threads: Vec<String> = (0..team.threads)
                        .map(|t| {
                            let r = serve.call(json!({
                                "action": "start",
                                "name": format!("stream_{t}"),
                                "prompt": "Read the module part by part and say what lacks a test.",
                            }));
                            r["details"]["snapshot"]["id"]
                                .as_str()
                                .expect("a started thread's id")
                                .to_string()
                        })
                        .collect();
                    ready.wait();
                    go.wait();
                    let (from, until) = edges.lock().unwrap().expect("the window's edges");
                    drive(serve, &threads, from, until)
                })
            })
            .collect();
        ready.wait();
        let from = Instant::now() + warmup;
        let until = from + window;
        *edges.lock().unwrap() = Some((from, until));
        go.wait();
        eprintln!(
            "team bench: {} threads started in {:.1} s; measuring {:.0} s after a {:.0} s warm-up",
            team.serves * team.threads,
            started.elapsed().as_secs_f64(),
            window.as_secs_f64(),
            warmup.as_secs_f64()
        );
        let sqlite = matches!(store, Store::Sqlite).then(|| PathBuf::from(&db));
        let pg_url = pg_url.as_deref();
        let sampler = scope.spawn(move || sample(pg_url, sqlite.as_deref(), &dir, from, until));
        let mut ops = Ops::default();
        for c in clients {
            let o = c.join().expect("a client panicked");
            ops.poll.merge(o.poll);
            ops.send.merge(o.send);
            ops.list.merge(o.list);
        }
        (ops, sampler.join().expect("the sampler panicked"))
    });
    // Stop: every serve's stdin closed together (each stops its children), then what is left
    // is killed.
    for s in &mut serves {
        s.pipe.close_stdin();
    }
    for s in &mut serves {
        s.close(Duration::from_secs(10));
    }
    reaper.kill_all();
    for s in &mut serves {
        let _ = s.child.wait();
    }
    for h in &mut hosts {
        if let Some(holder) = &mut h.holder {
            let _ = holder.wait();
        }
    }
    drop(proxy);
    if let Store::Postgres(url) = store {
        support::Pg::connect(url).exec(&format!(
            "DROP DATABASE IF EXISTS {PG_DATABASE} WITH (FORCE)"
        ));
    }
    Row {
        build: build.label.clone(),
        team,
        store: store_label,
        hosts: hosts_how,
        rtt,
        window,
        ops,
        sampled,
    }
}

const HEADER: &str = "| build | load | store | polls/s | poll p50 / p99 | send p50 / p99 | list p50 / p99 | write txn/s | advisory lock held, mean waiting | events recorded/s | notes |\n| --- | --- | --- | ---: | --- | --- | --- | --- | --- | ---: | --- |";

fn main() {
    // `cargo test --benches` runs this without `--bench`: nothing to check then.
    if !std::env::args().any(|a| a == "--bench") {
        eprintln!("team bench: run it with `cargo bench --bench team`");
        return;
    }
    let teams: Vec<Team> = knob("THREADBASE_BENCH_TEAM")
        .unwrap_or_else(|| "18x3x3".into())
        .split(',')
        .map(Team::parse)
        .collect();
    let stores: Vec<Store> = knob("THREADBASE_BENCH_STORE")
        .unwrap_or_else(|| "sqlite".into())
        .split(',')
        .map(|s| match s.trim() {
            "sqlite" => Store::Sqlite,
            u if u.starts_with("postgres://") || u.starts_with("postgresql://") => {
                Store::Postgres(u.to_string())
            }
            other => {
                panic!("THREADBASE_BENCH_STORE: {other:?} is neither sqlite nor a postgres:// URL")
            }
        })
        .collect();
    let builds = builds();
    let namespaces = pid_namespaces();
    if !namespaces {
        eprintln!(
            "team bench: `unshare --pid --fork --mount-proc` fails here (it needs root): hosts are distinct THREADBASE_HOST_IDs in one PID namespace"
        );
    }
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/criterion/team");
    std::fs::create_dir_all(&out).unwrap();
    let mut table = vec![HEADER.to_string()];
    for &team in &teams {
        for store in &stores {
            for build in &builds {
                let mut row = run_row(build, team, store, namespaces);
                let line = row.markdown();
                println!("{HEADER}\n{line}");
                table.push(line);
                std::fs::write(
                    out.join(format!("{}.json", row.key())),
                    serde_json::to_string_pretty(&row.json()).unwrap(),
                )
                .unwrap();
            }
        }
    }
    if table.len() > 2 {
        println!("\n{}", table.join("\n"));
    }
}
