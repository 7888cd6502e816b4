//! Fuzzed request lines against ONE long-lived real `threadbase serve` per contract run
//! (scripted-agent children): proptest strategies generate requests for every method of the
//! pinned protocol (`thread` with each action, `agent_*`, `threads_*`, `threads.snapshot`,
//! `threads.restore`, unknown methods) with valid shapes and random values, wrong types,
//! missing and extra fields, huge strings, deep nesting, invalid UTF-8, non-JSON lines, 2 MiB
//! lines and lines over the 8 MiB cap, duplicated and interleaved ids, and no ids.
//!
//! Checked: every line gets exactly one response (by id; a line without a usable id, or that
//! is not a JSON object, gets `{"id": null, "error": …}`), every error has a pinned code and a
//! `Repair:` hint, the process never exits (or panics a task) while fed, it exits 0 on EOF
//! leaving no child, and the database is consistent afterwards (`support/db_check.rs`).
//!
//! `THREADBASE_FUZZ_CASES` (default 300) sets the cases per contract run,
//! `THREADBASE_FUZZ_SEED` (a u64) replays a run; both are printed with the throughput.

use crate::support::{common, db_check, serve_client};

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Map, Value};
use serve_client::{processes_with_env, scripted_command, Scripted};
use threadbase::serve::server::MAX_REQUEST_BYTES;

const COORD: &str = "ses_fuzzcoord";
const MARKER_VAR: &str = "THREADBASE_TEST_MARKER";
const CODES: [&str; 10] = [
    "invalid_params",
    "unknown_reference",
    "ambiguous_reference",
    "conflict",
    "limit",
    "forbidden",
    "closed",
    "not_resumable",
    "io",
    "internal",
];
/// Cases between two syncs (all responses in, process alive).
const WINDOW: usize = 64;

// ---- the serve under test -----------------------------------------------------------------

#[derive(Default)]
struct Tally {
    /// Expected minus received responses, by the id's JSON text.
    outstanding: HashMap<String, i64>,
    responses: u64,
    null_id: u64,
    notifications: u64,
    ok: u64,
    codes: BTreeMap<String, u64>,
    /// Error messages by their first words, to see what the fuzzer mostly hits.
    messages: BTreeMap<String, u64>,
    violations: Vec<String>,
    closed: bool,
}

struct FuzzServe {
    child: Child,
    stdin: Option<ChildStdin>,
    tally: Arc<(Mutex<Tally>, Condvar)>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The last line sent per id (cut), for diagnostics.
    sent: HashMap<String, String>,
    lines: u64,
    bytes: u64,
}

fn short(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).to_string();
    if bytes.len() > 300 {
        format!("{s}… ({} bytes)", bytes.len())
    } else {
        s
    }
}

/// What the server must answer to one line: `None` for a blank line (skipped), else the id
/// text of its one response (`null` when the line has no usable id).
fn expected_id(line: &[u8]) -> Option<String> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.len() > MAX_REQUEST_BYTES {
        return Some("null".into());
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(m)) => m.get("id").cloned().unwrap_or(Value::Null).to_string(),
        _ => "null".into(),
    })
}

fn check_response(v: &Value) -> Result<(), String> {
    let Some(obj) = v.as_object() else {
        return Err(format!("not an object: {v}"));
    };
    match (obj.get("result"), obj.get("error")) {
        (Some(_), None) => Ok(()),
        (None, Some(e)) => {
            let code = e["code"].as_str().unwrap_or("");
            let message = e["message"].as_str().unwrap_or("");
            if !CODES.contains(&code) {
                return Err(format!("unpinned error code: {v}"));
            }
            if !message.contains("Repair:") {
                return Err(format!("error without a Repair: hint: {v}"));
            }
            Ok(())
        }
        _ => Err(format!("neither result nor error: {v}")),
    }
}

impl FuzzServe {
    fn start(w: &World, extra_env: &[(&str, &str)]) -> FuzzServe {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_threadbase"));
        cmd.arg("--db")
            .arg(&w.base.db)
            .arg("serve")
            .arg("--session-file")
            .arg(&w.parent_session)
            .args(["--session-id", COORD, "--cwd"])
            .arg(&w.base.root)
            .current_dir(&w.base.root);
        for k in [
            "THREADBASE_DB",
            "PI_THREADS_PATH",
            "PI_THREADS_DEPTH",
            "PI_THREADS_SELF_ID",
            "PI_THREADS_ROOT_SESSION_ID",
            "PI_THREADS_LIVE_TIMEOUT_MS",
        ] {
            cmd.env_remove(k);
        }
        cmd.env(
            "THREADBASE_PI_COMMAND",
            scripted_command(&w.base.root.join("script.json")),
        )
        .env(MARKER_VAR, &w.base.marker)
        .env("PI_CODING_AGENT_DIR", w.base.root.join("agent"))
        // Idle children are stopped soon, so the live limit does not refuse every start.
        .env("PI_THREADS_IDLE_CLEANUP_MS", "300")
        .env("PI_THREADS_MAX_THREADS", "6")
        .env("THREADBASE_MAX_WORKERS", "8");
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn serve");
        let stdout = child.stdout.take().unwrap();
        let tally: Arc<(Mutex<Tally>, Condvar)> = Arc::default();
        let t = tally.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                let (lock, cv) = &*t;
                let mut tally = lock.lock().unwrap_or_else(|p| p.into_inner());
                let v: Value = match serde_json::from_slice(&line) {
                    Ok(v) => v,
                    Err(e) => {
                        tally
                            .violations
                            .push(format!("non-JSON output line ({e}): {}", short(&line)));
                        continue;
                    }
                };
                if v.get("method").is_some() && v.get("id").is_none() {
                    tally.notifications += 1;
                    continue;
                }
                let Some(id) = v.get("id") else {
                    tally.violations.push(format!("response without id: {v}"));
                    continue;
                };
                let key = id.to_string();
                tally.responses += 1;
                if id.is_null() {
                    tally.null_id += 1;
                }
                if let Err(e) = check_response(&v) {
                    tally.violations.push(e);
                }
                match v.get("error") {
                    Some(e) => {
                        *tally
                            .codes
                            .entry(e["code"].as_str().unwrap_or("?").to_string())
                            .or_default() += 1;
                        let head: String = e["message"]
                            .as_str()
                            .unwrap_or("")
                            .chars()
                            .take(48)
                            .collect();
                        *tally.messages.entry(head).or_default() += 1;
                    }
                    None => tally.ok += 1,
                }
                let n = tally.outstanding.entry(key.clone()).or_default();
                *n -= 1;
                if *n < 0 {
                    tally
                        .violations
                        .push(format!("a response nobody asked for (id {key}): {v}"));
                }
                cv.notify_all();
            }
            let (lock, cv) = &*t;
            lock.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
            cv.notify_all();
        });
        let stderr = serve_client::collect(child.stderr.take().unwrap());
        FuzzServe {
            stdin: child.stdin.take(),
            child,
            tally,
            stderr,
            sent: HashMap::new(),
            lines: 0,
            bytes: 0,
        }
    }

    /// Writes one line (LF added); its expected response is registered first.
    fn send(&mut self, line: &[u8]) {
        debug_assert!(!line.contains(&b'\n'));
        if let Some(id) = expected_id(line) {
            *self
                .tally
                .0
                .lock()
                .unwrap()
                .outstanding
                .entry(id.clone())
                .or_default() += 1;
            self.sent.insert(id, short(line));
        }
        let stdin = self.stdin.as_mut().unwrap();
        let wrote = stdin
            .write_all(line)
            .and_then(|_| stdin.write_all(b"\n"))
            .and_then(|_| stdin.flush());
        if let Err(e) = wrote {
            panic!(
                "serve stopped reading ({e}); exit {:?}; stderr: {}",
                self.child.try_wait(),
                self.stderr_text()
            );
        }
        self.lines += 1;
        self.bytes += line.len() as u64 + 1;
    }

    fn stderr_text(&self) -> String {
        let s = self.stderr.lock().unwrap();
        String::from_utf8_lossy(&s[s.len().saturating_sub(4000)..]).to_string()
    }

    /// Waits until every line sent so far has its response; the process must still run.
    fn sync(&mut self) {
        let (lock, cv) = &*self.tally;
        let deadline = Instant::now() + Duration::from_secs(180);
        let mut tally = lock.lock().unwrap();
        loop {
            assert!(
                tally.violations.is_empty(),
                "protocol violations: {:#?}",
                &tally.violations[..tally.violations.len().min(10)]
            );
            if tally.outstanding.values().all(|&n| n == 0) {
                break;
            }
            let missing: Vec<String> = tally
                .outstanding
                .iter()
                .filter(|(_, &n)| n > 0)
                .map(|(id, n)| format!("{n}× id {id}: {}", self.sent.get(id).map_or("", |s| s)))
                .take(10)
                .collect();
            assert!(
                !tally.closed && Instant::now() < deadline,
                "missing responses (closed: {}): {missing:#?}; stderr: {}",
                tally.closed,
                self.stderr_text()
            );
            tally = cv
                .wait_timeout(tally, Duration::from_millis(200))
                .unwrap()
                .0;
        }
        tally.outstanding.retain(|_, n| *n != 0);
        drop(tally);
        self.sent.clear();
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "serve exited; stderr: {}",
            self.stderr_text()
        );
        let stderr = self.stderr_text();
        assert!(!stderr.contains("panicked"), "a task panicked: {stderr}");
    }

    /// Closes stdin: serve stops its children and exits 0.
    fn finish(mut self) -> (Tally, String) {
        self.sync();
        // The serve's peak resident memory, for the report.
        let peak = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("VmHWM:"))
                    .map(|l| l["VmHWM:".len()..].trim().to_string())
            })
            .unwrap_or_default();
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "serve did not exit on EOF");
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(
            status.success(),
            "serve exit {status}; stderr: {}",
            self.stderr_text()
        );
        let (lock, cv) = &*self.tally;
        let mut tally = lock.lock().unwrap();
        while !tally.closed {
            tally = cv
                .wait_timeout(tally, Duration::from_millis(100))
                .unwrap()
                .0;
        }
        let stderr = self.stderr_text();
        assert!(!stderr.contains("panicked"), "a task panicked: {stderr}");
        (std::mem::take(&mut *tally), peak)
    }
}

// ---- the world ----------------------------------------------------------------------------

struct World {
    base: Scripted,
    parent_session: PathBuf,
}

fn world() -> World {
    let base = Scripted::new("fuzz-serve");
    std::fs::create_dir_all(base.root.join("work")).unwrap();
    let lines = [
        json!({"type":"session","version":3,"id":COORD,"timestamp":"2026-11-30T00:00:00.000Z","cwd":base.root}),
        json!({"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-11-30T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"hello"}],"timestamp":1}}),
        json!({"type":"message","id":"a0000002","parentId":"a0000001","timestamp":"2026-11-30T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"hi there"}],"stopReason":"stop","timestamp":2}}),
    ];
    let parent_session = base.session_file("sessions/parent.jsonl", &lines);
    // Short-lived work: a quick reply, sometimes a tool call and a short pause.
    let script = json!({"turns": [
        [{"text": "looking", "deltas": 2}, {"tool": "bash", "args": {"command": "ls"}, "result": "a\n"}, {"text": "found a"}],
        {"steps": [{"delay_ms": 30}, {"text": "answer to {prompt}", "deltas": 3}]}
    ], "default_reply": "done: {prompt}"});
    base.script("script", &script.to_string());
    World {
        base,
        parent_session,
    }
}

// ---- strategies ---------------------------------------------------------------------------

/// How a field's valid values look.
#[derive(Clone)]
enum K {
    /// One of these strings (the first `.1` are valid), or random text.
    S((Vec<String>, usize)),
    /// Free text: short, long, or (rarely) about 2 MiB.
    Text,
    B,
    /// An integer up to this bound.
    N(u64),
    /// An array of strings from this pool (the first `.1` are valid).
    Arr((Vec<String>, usize)),
}

/// A pool of valid then invalid values.
fn pool(valid: &[&str], invalid: &[&str]) -> (Vec<String>, usize) {
    let all = valid.iter().chain(invalid).map(|s| s.to_string()).collect();
    (all, valid.len())
}

fn json_any() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e12f64..1e12).prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-zA-Z]{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

fn text() -> BoxedStrategy<String> {
    prop_oneof![
        300 => "\\PC{0,40}",
        50 => Just(String::new()),
        40 => "[a-z ]{1,20}".prop_map(|s| s.repeat(200)),
        1 => (1usize..=2 << 20).prop_map(|n| "x".repeat(n)),
    ]
    .boxed()
}

fn value_of(k: &K) -> BoxedStrategy<Value> {
    match k {
        K::S((pool, _)) => prop_oneof![
            7 => proptest::sample::select(pool.clone()).prop_map(Value::from),
            3 => "\\PC{0,16}".prop_map(Value::from),
        ]
        .boxed(),
        K::Text => text().prop_map(Value::from).boxed(),
        K::B => any::<bool>().prop_map(Value::from).boxed(),
        K::N(max) => prop_oneof![
            9 => (0..=*max).prop_map(Value::from),
            1 => prop_oneof![Just(json!(-1)), Just(json!(1.5)), Just(json!(u64::MAX))],
        ]
        .boxed(),
        K::Arr((pool, _)) => prop::collection::vec(
            prop_oneof![
                8 => proptest::sample::select(pool.clone()),
                2 => "\\PC{0,10}".prop_map(String::from),
            ],
            0..4,
        )
        .prop_map(Value::from)
        .boxed(),
    }
}

/// A valid value from the pools only (no random text), so valid requests are common.
fn clean_value_of(k: &K) -> BoxedStrategy<Value> {
    match k {
        K::S((pool, n)) => proptest::sample::select(pool[..(*n).max(1)].to_vec())
            .prop_map(Value::from)
            .boxed(),
        K::Arr((_, 0)) => Just(json!([])).boxed(),
        K::Arr((pool, n)) => {
            prop::collection::vec(proptest::sample::select(pool[..*n].to_vec()), 0..3)
                .prop_map(Value::from)
                .boxed()
        }
        K::Text => prop_oneof![
            20 => "[a-zA-Z ]{1,30}",
            1 => text(),
        ]
        .prop_map(Value::from)
        .boxed(),
        other => value_of(other),
    }
}

/// Params for a field list. Half the time "clean": each field valid from its pool (92%) or
/// missing. Otherwise noisy: each field valid (75%), of a wrong type (10%) or missing (15%),
/// sometimes an extra field, rarely params that are not an object at all.
fn params(fields: Vec<(&'static str, K)>) -> BoxedStrategy<Value> {
    let clean: Vec<BoxedStrategy<Option<(String, Value)>>> = fields
        .iter()
        .map(|(name, k)| {
            let name = *name;
            if matches!(k, K::S((_, 0))) {
                // No valid value: a clean request leaves the field out.
                return Just(None).boxed();
            }
            prop_oneof![
                92 => clean_value_of(k).prop_map(move |v| Some((name.to_string(), v))),
                8 => Just(None),
            ]
            .boxed()
        })
        .collect();
    let clean = clean
        .prop_map(|each| Value::Object(each.into_iter().flatten().collect()))
        .boxed();
    let each: Vec<BoxedStrategy<Option<(String, Value)>>> = fields
        .into_iter()
        .map(|(name, k)| {
            prop_oneof![
                75 => value_of(&k).prop_map(move |v| Some((name.to_string(), v))),
                10 => json_any().prop_map(move |v| Some((name.to_string(), v))),
                15 => Just(None),
            ]
            .boxed()
        })
        .collect();
    let extra = prop::option::weighted(0.1, ("[a-zA-Z_]{1,10}", json_any()));
    let obj = (each, extra).prop_map(|(each, extra)| {
        let mut m = Map::new();
        for (k, v) in each.into_iter().flatten() {
            m.insert(k, v);
        }
        if let Some((k, v)) = extra {
            m.insert(k, v);
        }
        Value::Object(m)
    });
    prop_oneof![
        50 => clean,
        47 => obj,
        3 => json_any(),
    ]
    .boxed()
}

/// `(method, params)` generators of one contract.
fn contract_requests(which: char, w: &World) -> BoxedStrategy<(Value, Value)> {
    let root = w.base.root.display().to_string();
    let work = w.base.root.join("work").display().to_string();
    let tasks = pool(&["t0", "t1", "t2", "fuzz_a", "b_2"], &["Bad-Name", ""]);
    let refs = pool(
        &[
            "t0",
            "t1",
            "/root/t0",
            "/root/t1/t2",
            "root/t2",
            "fuzz_a",
            "b_2",
        ],
        &["/root", ".", "..", "thread_000000000000", "/root/", ""],
    );
    let names = pool(&["Docs", "a name", "Ünïcode ✓"], &[""]);
    let args = pool(
        &[],
        &[
            "--model",
            "scripted/x",
            "--thinking",
            "high",
            "--bogus",
            "-e",
        ],
    );
    let cwds = pool(&[&root, &work], &["/nonexistent", "rel"]);
    let detail = pool(&["summary", "tail", "full"], &[]);
    let m = |s: &str| Value::from(s);
    match which {
        'A' => {
            let action = |a: &'static str, fields: Vec<(&'static str, K)>| {
                let action_value = prop_oneof![
                    95 => Just(Value::from(a)),
                    5 => json_any(),
                ];
                (action_value, params(fields))
                    .prop_map(|(a, mut p)| {
                        if let Value::Object(o) = &mut p {
                            o.insert("action".into(), a);
                        }
                        (Value::from("thread"), p)
                    })
                    .boxed()
            };
            prop_oneof![
                4 => action("start", vec![("prompt", K::Text), ("name", K::S(names.clone())), ("taskName", K::S(tasks.clone())), ("args", K::Arr(args.clone())), ("cwd", K::S(cwds.clone()))]),
                3 => action("list", vec![("state", K::S(pool(&["live", "closed", "all"], &[]))), ("visibility", K::S(pool(&["active", "archived", "all"], &[]))), ("parent", K::S(refs.clone())), ("ancestor", K::S(refs.clone()))]),
                3 => action("poll", vec![("id", K::S(refs.clone())), ("detail", K::S(detail.clone()))]),
                2 => action("send", vec![("id", K::S(refs.clone())), ("message", K::Text), ("mode", K::S(pool(&["prompt", "steer", "follow_up"], &[])))]),
                2 => action("stop", vec![("id", K::S(refs.clone())), ("force", K::B)]),
                2 => action("wait", vec![("id", K::S(refs.clone())), ("detail", K::S(detail.clone())), ("timeoutMs", K::N(1500))]),
                2 => action("resume", vec![("id", K::S(refs.clone()))]),
                2 => action("fork", vec![("id", K::S(refs.clone())), ("entryId", K::S(pool(&["a0000001", "a0000002"], &["zzz"]))), ("position", K::S(pool(&["at", "before"], &[]))), ("name", K::S(names.clone())), ("taskName", K::S(tasks.clone())), ("args", K::Arr(args.clone()))]),
                2 => action("archive", vec![("id", K::S(refs.clone())), ("archived", K::B)]),
            ]
            .boxed()
        }
        'B' => {
            let paths = pool(
                &[
                    "fix-auth",
                    "/root/fix-auth",
                    "/root/fix-auth/review",
                    "/k",
                    "/k/l",
                ],
                &["..", "a//b", "/root", " x", "a%20b"],
            );
            let call = |name: &'static str, fields: Vec<(&'static str, K)>| {
                params(fields).prop_map(move |p| (m(name), p)).boxed()
            };
            prop_oneof![
                call(
                    "agent_spawn",
                    vec![
                        ("path", K::S(paths.clone())),
                        ("type", K::S(pool(&["general", "worker", "reviewer"], &[]))),
                        ("task", K::Text),
                        ("wait", K::B)
                    ]
                ),
                call(
                    "agent_wait",
                    vec![("path", K::S(paths.clone())), ("timeoutMs", K::N(1500))]
                ),
                call(
                    "agent_steer",
                    vec![("path", K::S(paths.clone())), ("message", K::Text)]
                ),
                call("agent_status", vec![("path", K::S(paths.clone()))]),
                call("agent_update", vec![("message", K::Text)]),
                call("agent_pause", vec![("reason", K::Text)]),
                call("agent_stop", vec![("path", K::S(paths.clone()))]),
                call(
                    "agent_output",
                    vec![
                        ("path", K::S(paths.clone())),
                        ("offset", K::N(100_000)),
                        ("limit", K::N(20_000))
                    ]
                ),
                call("agent_types", vec![]),
            ]
            .boxed()
        }
        _ => {
            let keys = pool(&["k0", "k1", "k2", "review", "é ✓ any chars"], &[""]);
            let mut workers: Vec<String> = ["k0", "k1", "k2", "review"]
                .iter()
                .map(|k| {
                    threadbase::contract::worker::worker_identity(
                        &threadbase::domain::SessionId::new(COORD),
                        k,
                    )
                    .into_string()
                })
                .collect();
            workers.extend([
                "ses_0123456789abcdef0123456789abcdef".to_string(),
                "nope".into(),
            ]);
            let workers = (workers, 4);
            let dirs = pool(
                &[&work, &root],
                &["/", "/nonexistent", "relative", "/tmp/*"],
            );
            let call = |name: &'static str, fields: Vec<(&'static str, K)>| {
                params(fields).prop_map(move |p| (m(name), p)).boxed()
            };
            prop_oneof![
                4 => call("threads_spawn", vec![("key", K::S(keys.clone())), ("title", K::Text), ("directory", K::S(dirs.clone())), ("task", K::Text), ("agent", K::S(pool(&[], &["reviewer", "general", ""]))), ("paths", K::Arr(dirs.clone()))]),
                2 => call("threads_list", vec![]),
                3 => call("threads_send", vec![("workerID", K::S(workers.clone())), ("key", K::S(keys.clone())), ("text", K::Text)]),
                2 => call("threads_interrupt", vec![("workerID", K::S(workers.clone()))]),
                2 => call("threads_hide", vec![("workerID", K::S(workers.clone()))]),
                2 => call("threads_report", vec![("verdict", K::S(pool(&["PASS", "PASS WITH NOTES", "FAIL", "INCONCLUSIVE"], &[]))), ("summary", K::Text), ("evidence", K::Arr(pool(&["cargo test: ok", ""], &[])))]),
                1 => call("threads.snapshot", vec![("coordinatorIDs", K::Arr(pool(&[COORD, "ses_other"], &[])))]),
                1 => call("threads.restore", vec![("coordinatorIDs", K::Arr(pool(&[COORD, "ses_other"], &[])))]),
            ]
            .boxed()
        }
    }
}

fn id_value() -> BoxedStrategy<Option<Value>> {
    prop_oneof![
        // Small integers: ids repeat across requests in flight.
        50 => (0u64..40).prop_map(|n| Some(Value::from(n))),
        10 => Just(None),
        8 => "[a-z0-9-]{0,8}".prop_map(|s| Some(Value::from(s))),
        5 => Just(Some(Value::Null)),
        5 => any::<i64>().prop_map(|n| Some(Value::from(n))),
        4 => (-1e9f64..1e9).prop_map(|f| Some(Value::from(f))),
        3 => json_any().prop_map(Some),
    ]
    .boxed()
}

fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

/// One request line (no LF inside).
fn line(which: char, w: &World) -> BoxedStrategy<Vec<u8>> {
    let envelope = (id_value(), contract_requests(which, w)).prop_map(|(id, (method, params))| {
        let mut o = Map::new();
        if let Some(id) = id {
            o.insert("id".into(), id);
        }
        o.insert("method".into(), method);
        o.insert("params".into(), params);
        serde_json::to_vec(&Value::Object(o)).unwrap()
    });
    let method_junk = (
        id_value(),
        json_any(),
        prop_oneof![
            Just(Value::from("Thread")),
            Just(Value::from("threads.list")),
            Just(Value::from("thread ")),
            Just(Value::from("")),
            "\\PC{0,12}".prop_map(Value::from),
            json_any(),
        ],
    )
        .prop_map(|(id, params, method)| {
            let mut o = Map::new();
            if let Some(id) = id {
                o.insert("id".into(), id);
            }
            if !method.is_null() {
                o.insert("method".into(), method);
            }
            o.insert("params".into(), params);
            serde_json::to_vec(&Value::Object(o)).unwrap()
        });
    let no_lf = |mut b: Vec<u8>| {
        for c in &mut b {
            if *c == b'\n' {
                *c = b' ';
            }
        }
        b
    };
    prop_oneof![
        70 => envelope.boxed(),
        6 => method_junk.boxed(),
        // Not JSON, invalid UTF-8, JSON that is not an object, blank.
        3 => "\\PC{1,40}".prop_map(|s: String| s.into_bytes()).prop_map(no_lf).boxed(),
        3 => prop::collection::vec(any::<u8>(), 1..64).prop_map(no_lf).boxed(),
        2 => (id_value(), Just(())).prop_map(|(id, _)| {
            let id = id.unwrap_or(Value::Null);
            let mut b = format!("{{\"id\":{id},\"method\":\"thread\",\"params\":{{\"action\":\"list\",\"x\":\"").into_bytes();
            b.extend_from_slice(b"\xff\xfe\xc3\x28\"}}");
            b
        }).boxed(),
        2 => json_any().prop_filter("not an object", |v| !v.is_object()).prop_map(|v| serde_json::to_vec(&v).unwrap()).boxed(),
        1 => prop_oneof![Just(b"".to_vec()), Just(b"   \t".to_vec()), Just(b"\r".to_vec())].boxed(),
        // Trailing CR.
        2 => (0u64..40).prop_map(|n| format!("{{\"id\":{n},\"method\":\"thread\",\"params\":{{\"action\":\"list\"}}}}\r").into_bytes()).boxed(),
        // Deep nesting, under and over serde_json's limit of 128.
        2 => (1usize..400, 0u64..40).prop_map(|(d, n)| format!("{{\"id\":{n},\"method\":\"thread\",\"params\":{{\"action\":\"list\",\"deep\":{}}}}}", nested(d)).into_bytes()).boxed(),
        // About 2 MiB, and (rarely) over the 8 MiB cap.
        1 => (0u64..40, prop_oneof![49 => (1usize << 20)..(2 << 20), 1 => MAX_REQUEST_BYTES..MAX_REQUEST_BYTES + 4096]).prop_map(|(n, len)| format!("{{\"id\":{n},\"method\":\"thread\",\"params\":{{\"action\":\"poll\",\"id\":\"t0\",\"pad\":\"{}\"}}}}", "p".repeat(len)).into_bytes()).boxed(),
    ]
    .boxed()
}

/// Deterministic lines every run sends once, so a short run covers the rare shapes.
fn specials(which: char) -> Vec<Vec<u8>> {
    let method = match which {
        'A' => json!({"id": "s-list", "method": "thread", "params": {"action": "list"}}),
        'B' => json!({"id": "s-status", "method": "agent_status", "params": {}}),
        _ => json!({"id": "s-list", "method": "threads_list", "params": {}}),
    };
    vec![
        serde_json::to_vec(&method).unwrap(),
        // Over the cap: one null-id error, and the next line is read normally.
        format!("{{\"id\":\"s-big\",\"pad\":\"{}\"}}", "q".repeat(MAX_REQUEST_BYTES + 16)).into_bytes(),
        format!("{{\"id\":\"s-2mib\",\"method\":\"thread\",\"params\":{{\"action\":\"start\",\"prompt\":\"{}\"}}}}", "r".repeat(2 << 20)).into_bytes(),
        format!("{{\"id\":\"s-deep\",\"method\":\"thread\",\"params\":{}}}", nested(100_000)).into_bytes(),
        b"\xff\xff\xff\xff".to_vec(),
        br#"{"id": 7, "method": "thread", "params": {"action": "list"}}"#.to_vec(),
        br#"{"id": 7, "method": "thread", "params": {"action": "list"}}"#.to_vec(),
        br#"{"method": "thread", "params": {"action": "list"}}"#.to_vec(),
        br#"{"id": 8, "id": 9, "method": "nope"}"#.to_vec(),
        serde_json::to_vec(&method).unwrap(),
    ]
}

fn run_contract(which: char) {
    let cases: usize = std::env::var("THREADBASE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let seed: u64 = std::env::var("THREADBASE_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| u64::from_str_radix(&threadbase::ids::random_hex(16), 16).unwrap());
    // Printed first, so a failing run's captured output names it (THREADBASE_FUZZ_SEED).
    println!("contract {which}: seed {seed}, {cases} cases");
    let w = world();
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    seed_bytes[8] = which as u8;
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let case = prop::collection::vec(line(which, &w), 1..4);
    let started = Instant::now();
    let mut serve = FuzzServe::start(&w, &[]);
    for l in specials(which) {
        serve.send(&l);
    }
    serve.sync();
    for n in 0..cases {
        let lines = case.new_tree(&mut runner).unwrap().current();
        for l in &lines {
            serve.send(l);
        }
        if (n + 1) % WINDOW == 0 {
            serve.sync();
        }
    }
    let (lines, bytes) = (serve.lines, serve.bytes);
    let (tally, peak) = serve.finish();
    let elapsed = started.elapsed();
    let mut left = processes_with_env(MARKER_VAR, &w.base.marker);
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
        left = processes_with_env(MARKER_VAR, &w.base.marker);
    }
    assert!(
        left.is_empty(),
        "children left after serve exited: {left:?}"
    );
    let how =
        db_check::db_check(&w.base.db).unwrap_or_else(|e| panic!("database inconsistent: {e}"));
    let live = common::count(
        &w.base.db,
        "SELECT count(*) FROM threads WHERE status = 'live'",
    );
    assert_eq!(live, 0, "serve exited on EOF with live threads");
    let threads = common::count(&w.base.db, "SELECT count(*) FROM threads");
    println!(
        "contract {which}: seed {seed}: {cases} cases, {lines} lines ({:.1} MiB), {} responses ({} ok, {} with id null), {} notifications, {threads} threads stored; errors by code {:?}; {:.1} s, {:.0} cases/s; serve peak RSS {peak}; db check: {how}",
        bytes as f64 / (1 << 20) as f64,
        tally.responses,
        tally.ok,
        tally.null_id,
        tally.notifications,
        tally.codes,
        elapsed.as_secs_f64(),
        cases as f64 / elapsed.as_secs_f64(),
    );
    let mut common: Vec<_> = tally.messages.iter().collect();
    common.sort_by(|a, b| b.1.cmp(a.1));
    for (head, n) in common.iter().take(25) {
        println!("  {n:6}  {head}");
    }
}

#[test]
fn fuzz_contract_a_thread_tool() {
    run_contract('A');
}

#[test]
fn fuzz_contract_b_agent_tools() {
    run_contract('B');
}

#[test]
fn fuzz_contract_c_worker_tools() {
    run_contract('C');
}
