//! The scripted agent as a real child process speaking Pi 1.6's RPC protocol.
//!
//! The CLI subcommand is not needed: the test binary re-executes itself with
//! `SCRIPTED_AGENT_CHILD_ARGS` set, and the `child_entry` test then runs
//! `threadbase::scripted_agent::run` on its own stdin/stdout. libtest prints a short preamble
//! ("running 1 test") on stdout before the child starts; the harness skips the lines before the
//! first JSON line and fails on any later non-JSON line.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::process::{kill_process, kill_process_group, Pid, Signal};
use serde_json::{json, Value};

const CHILD_ENV: &str = "SCRIPTED_AGENT_CHILD_ARGS";
const WAIT: Duration = Duration::from_secs(10);

/// Not a test of its own: the body of the re-executed child process.
#[test]
fn child_entry() {
    let Ok(raw) = std::env::var(CHILD_ENV) else {
        return;
    };
    let args: Vec<String> = serde_json::from_str(&raw).expect("child args");
    let code = match threadbase::scripted_agent::run(Path::new(&args[0]), &args[1..]) {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "{e}");
            2
        }
    };
    std::process::exit(code);
}

static SCRIPT_SEQ: AtomicUsize = AtomicUsize::new(0);

struct Agent {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: mpsc::Receiver<Value>,
    stderr: Arc<Mutex<String>>,
    exited: Option<ExitStatus>,
}

impl Agent {
    /// Starts a scripted agent with `script` (written into `dir`) and Pi flags `args`.
    fn spawn(dir: &Path, script: &Value, args: &[&str]) -> Agent {
        let n = SCRIPT_SEQ.fetch_add(1, Ordering::Relaxed);
        let script_path = dir.join(format!("script-{n}.json"));
        std::fs::write(&script_path, serde_json::to_vec_pretty(script).unwrap()).unwrap();
        let mut all = vec![script_path.to_string_lossy().into_owned()];
        all.extend(args.iter().map(|s| s.to_string()));
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "scripted_agent::child_entry",
                "--exact",
                "--nocapture",
                "--test-threads=1",
                "-q",
            ])
            .env(CHILD_ENV, serde_json::to_string(&all).unwrap())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut seen_json = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Value>(&line) {
                    Ok(v) if v.is_object() => {
                        seen_json = true;
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                    _ if !seen_json => {} // libtest's preamble
                    _ => {
                        let _ = tx.send(json!({ "__non_json_line": line }));
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        {
            let stderr = Arc::clone(&stderr);
            let pipe = child.stderr.take().unwrap();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    let mut s = stderr.lock().unwrap();
                    s.push_str(&line);
                    s.push('\n');
                }
            });
        }
        let stdin = child.stdin.take();
        Agent {
            child,
            stdin,
            rx,
            stderr,
            exited: None,
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.id() as i32).unwrap()
    }

    fn send(&mut self, cmd: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        let mut line = cmd.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    fn send_raw(&mut self, raw: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(raw.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Closes stdin and expects the agent to exit 0.
    fn finish(&mut self) {
        self.close_stdin();
        assert_eq!(self.wait_exit(WAIT).code(), Some(0));
    }

    fn next(&mut self, timeout: Duration) -> Option<Value> {
        let v = self.rx.recv_timeout(timeout).ok()?;
        assert!(
            v.get("__non_json_line").is_none(),
            "non-JSON stdout line: {v}"
        );
        Some(v)
    }

    /// Every record up to and including the first that matches `pred`.
    fn until(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + WAIT;
        let mut got = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next(left) {
                Some(v) => {
                    let hit = pred(&v);
                    got.push(v);
                    if hit {
                        return got;
                    }
                }
                None => panic!(
                    "timed out waiting for {what}; got {:#?}\nstderr: {}",
                    got,
                    self.stderr()
                ),
            }
        }
    }

    fn until_type(&mut self, ty: &str) -> Vec<Value> {
        self.until(ty, |v| v["type"] == ty)
    }

    /// Every record up to and including the response to `id`.
    fn response(&mut self, id: &str) -> Vec<Value> {
        self.until(&format!("response {id}"), |v| {
            v["type"] == "response" && v["id"] == id
        })
    }

    fn request(&mut self, mut cmd: Value) -> Value {
        static REQ: AtomicUsize = AtomicUsize::new(0);
        let id = format!("q{}", REQ.fetch_add(1, Ordering::Relaxed));
        cmd["id"] = json!(id);
        self.send(cmd);
        self.response(&id).pop().unwrap()
    }

    fn state(&mut self) -> Value {
        let r = self.request(json!({"type": "get_state"}));
        assert_eq!(r["success"], true, "{r}");
        r["data"].clone()
    }

    fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                self.exited = Some(s);
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "child did not exit; stderr: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until stderr contains `needle` (its reader thread may lag behind the child).
    fn wait_stderr(&self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let s = self.stderr();
            if s.contains(needle) {
                return s;
            }
            assert!(Instant::now() < deadline, "stderr lacks {needle:?}: {s:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Drains what is left of stdout after the child exited.
    fn rest(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        while let Some(v) = self.next(Duration::from_millis(300)) {
            out.push(v);
        }
        out
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = kill_process_group(self.pid(), Signal::KILL);
            let _ = self.child.wait();
        }
    }
}

fn rpc_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--mode", "rpc", "--no-approve", "--offline"];
    v.extend_from_slice(extra);
    v
}

/// A compact label per record: `response:prompt`, `message_start:user`, `text_delta`, …
fn label(v: &Value) -> String {
    let ty = v["type"].as_str().unwrap_or("?");
    match ty {
        "response" => format!("response:{}", v["command"].as_str().unwrap_or("?")),
        "message_start" | "message_end" => {
            format!("{ty}:{}", v["message"]["role"].as_str().unwrap_or("?"))
        }
        "message_update" => v["assistantMessageEvent"]["type"]
            .as_str()
            .unwrap_or("?")
            .to_string(),
        _ => ty.to_string(),
    }
}

/// The labels Pi's records have from a tool's end to the start of the next turn's assistant
/// message: the tool result and the turn's end, then the next turn.
const AFTER_A_TOOL: [&str; 6] = [
    "tool_execution_end",
    "message_start:toolResult",
    "message_end:toolResult",
    "turn_end",
    "turn_start",
    "message_start:assistant",
];

fn labels(v: &[Value]) -> Vec<String> {
    v.iter().map(label).collect()
}

fn assistant_texts(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter(|v| v["type"] == "message_end" && v["message"]["role"] == "assistant")
        .map(|v| {
            v["message"]["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "text")
                .map(|b| b["text"].as_str().unwrap().to_string())
                .collect::<String>()
        })
        .collect()
}

fn user_texts(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter(|v| v["type"] == "message_start" && v["message"]["role"] == "user")
        .map(|v| {
            v["message"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A label per session entry: its type, `message:<role>` for a message.
fn entry_kinds(entries: &[Value]) -> Vec<String> {
    entries
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "message" => format!("message:{}", e["message"]["role"].as_str().unwrap()),
            t => t.to_string(),
        })
        .collect()
}

fn assert_chain(entries: &[Value]) {
    let mut prev: Option<&str> = None;
    for e in entries {
        let id = e["id"].as_str().unwrap();
        assert_eq!(id.len(), 8, "entry id {id}");
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "entry id {id}");
        match prev {
            None => assert!(e["parentId"].is_null(), "{e}"),
            Some(p) => assert_eq!(e["parentId"], p, "{e}"),
        }
        assert!(e["timestamp"].as_str().unwrap().ends_with('Z'));
        prev = Some(id);
    }
}

#[test]
fn prompt_emits_pi_event_order_and_writes_the_session_file() {
    let dir = tempfile::tempdir().unwrap();
    let session: PathBuf = dir
        .path()
        .join("sessions")
        .join("nested")
        .join("child-1.jsonl");
    let session_arg = session.to_string_lossy().into_owned();
    let script = json!({"turns": [[
        {"text": "Let me check.", "deltas": 3},
        {"tool": "bash", "args": {"command": "echo hi"}, "result": "hi\n"},
        {"text": "All done."}
    ]]});
    let flags = [
        "--session",
        &session_arg,
        "--name",
        "child-1",
        "--model",
        "fake/fake-model",
    ];
    let more = [
        "--thinking",
        "low",
        "--exclude-tools",
        "edit",
        "--no-extensions",
        "-nc",
    ];
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&[flags, more].concat()));

    let st = agent.state();
    assert_eq!(st["sessionFile"], session_arg.as_str());
    assert_eq!(st["sessionName"], "child-1");
    assert_eq!(st["model"]["provider"], "fake");
    assert_eq!(st["model"]["id"], "fake-model");
    assert_eq!(st["thinkingLevel"], "low");
    assert_eq!(st["isStreaming"], false);
    assert_eq!(st["messageCount"], 0);
    assert!(!session.exists(), "the file is written lazily");
    let session_id = st["sessionId"].as_str().unwrap().to_string();

    agent.send(json!({"id": "r1", "type": "prompt", "message": "run echo"}));
    let got = agent.until_type("agent_settled");
    let before_the_tool_ends = [
        "response:prompt",
        "agent_start",
        "turn_start",
        "message_start:system",
        "message_end:system",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "text_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "message_end:assistant",
        "tool_execution_start",
        "tool_execution_update",
    ];
    let last_answer = [
        "text_start",
        "text_delta",
        "text_end",
        "message_end:assistant",
        "turn_end",
        "agent_end",
        "agent_settled",
    ];
    let expected = [&before_the_tool_ends[..], &AFTER_A_TOOL, &last_answer].concat();
    assert_eq!(labels(&got), expected);

    let resp = &got[0];
    assert_eq!(resp["id"], "r1");
    assert_eq!(resp["success"], true);
    assert_eq!(resp["data"], json!({"disposition": "started"}));
    let deltas: String = got
        .iter()
        .filter(|v| label(v) == "text_delta")
        .take(3)
        .map(|v| v["assistantMessageEvent"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "Let me check.");
    let ends: Vec<&Value> = got
        .iter()
        .filter(|v| label(v) == "message_end:assistant")
        .collect();
    let first = &ends[0]["message"];
    assert_eq!(first["stopReason"], "toolUse");
    assert_eq!(first["provider"], "fake");
    assert_eq!(
        first["content"][0],
        json!({"type": "text", "text": "Let me check."})
    );
    assert_eq!(first["content"][1]["type"], "toolCall");
    assert_eq!(first["content"][1]["name"], "bash");
    assert_eq!(
        first["content"][1]["arguments"],
        json!({"command": "echo hi"})
    );
    let call_id = first["content"][1]["id"].as_str().unwrap();
    let tool_end = got
        .iter()
        .find(|v| v["type"] == "tool_execution_end")
        .unwrap();
    assert_eq!(tool_end["toolCallId"], call_id);
    assert_eq!(tool_end["result"]["content"][0]["text"], "hi\n");
    assert_eq!(tool_end["isError"], false);
    assert!(tool_end["durationMs"].is_u64());
    assert_eq!(ends[1]["message"]["stopReason"], "stop");
    let turn_end = got.iter().find(|v| v["type"] == "turn_end").unwrap();
    assert_eq!(turn_end["toolResults"][0]["role"], "toolResult");
    assert_eq!(turn_end["toolResults"][0]["toolCallId"], call_id);
    let agent_end = got.iter().find(|v| v["type"] == "agent_end").unwrap();
    let roles: Vec<&str> = agent_end["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "toolResult", "assistant"]
    );
    assert_eq!(agent_end["willRetry"], false);
    assert_eq!(got.last().unwrap()["aborted"], false);

    let st = agent.state();
    assert_eq!(st["isStreaming"], false);
    assert_eq!(st["messageCount"], 5);
    assert_eq!(st["pendingMessageCount"], 0);
    let last = agent.request(json!({"type": "get_last_assistant_text"}));
    assert_eq!(last["data"]["text"], "All done.");

    agent.finish();

    // The session file, as Pi 1.6 writes it.
    let lines = read_jsonl(&session);
    let header = &lines[0];
    assert_eq!(header["type"], "session");
    assert_eq!(header["version"], 3);
    assert_eq!(header["id"], session_id.as_str());
    assert!(Path::new(header["cwd"].as_str().unwrap()).is_dir());
    assert!(header["timestamp"].as_str().unwrap().ends_with('Z'));
    let entries = &lines[1..];
    assert_eq!(
        entry_kinds(entries),
        [
            "model_change",
            "thinking_level_change",
            "session_info",
            "message:system",
            "message:user",
            "message:assistant",
            "message:toolResult",
            "message:assistant",
        ]
    );
    assert_chain(entries);
    assert_eq!(entries[0]["provider"], "fake");
    assert_eq!(entries[0]["modelId"], "fake-model");
    assert_eq!(entries[1]["thinkingLevel"], "low");
    assert_eq!(entries[2]["name"], "child-1");
    assert_eq!(entries[4]["message"]["content"][0]["text"], "run echo");
    assert_eq!(entries[7]["message"]["content"][0]["text"], "All done.");
    let before = std::fs::read_to_string(&session).unwrap();

    // Resume: the file is kept and appended to, the context is loaded.
    let script = json!({"turns": ["second answer to {prompt}"]});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&flags));
    let st = agent.state();
    assert_eq!(st["sessionId"], session_id.as_str());
    assert_eq!(st["messageCount"], 5);
    agent.send(json!({"id": "r2", "type": "prompt", "message": "again"}));
    let got = agent.until_type("agent_settled");
    assert_eq!(assistant_texts(&got), ["second answer to again"]);
    // Like Pi 1.6, no second system message: the resumed context has one.
    assert_eq!(agent.state()["messageCount"], 7);
    agent.finish();
    let after = std::fs::read_to_string(&session).unwrap();
    assert!(after.starts_with(&before), "existing content is kept");
    let lines = read_jsonl(&session);
    let entries = &lines[1..];
    assert_chain(entries);
    assert_eq!(
        entry_kinds(&entries[8..]),
        ["session_info", "message:user", "message:assistant"]
    );
}

#[test]
fn host_written_session_file_is_resumed_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("fork.jsonl");
    let cwd = dir.path().to_string_lossy().into_owned();
    let header = json!({"type": "session", "version": 3, "id": "ses_0123456789abcdef0123456789abcdef",
        "timestamp": "2026-11-30T00:21:41.191Z", "cwd": cwd, "parentSession": "/abs/parent.jsonl"});
    let e1 = json!({"type": "message", "id": "aaaa0001", "parentId": null, "timestamp": "2026-11-30T00:21:42.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "earlier"}], "timestamp": 1}});
    let e2 = json!({"type": "message", "id": "aaaa0002", "parentId": "aaaa0001", "timestamp": "2026-11-30T00:21:43.000Z",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "earlier reply"}], "api": "x",
        "provider": "fake", "model": "fake-model", "usage": {}, "stopReason": "stop", "timestamp": 2}});
    // No trailing newline: appending must still start on a fresh line.
    std::fs::write(&session, format!("{header}\n{e1}\n{e2}")).unwrap();
    let script = json!({"system_message": false, "turns": ["ok"]});
    let arg = session.to_string_lossy().into_owned();
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--session", &arg]));
    let st = agent.state();
    assert_eq!(st["sessionId"], "ses_0123456789abcdef0123456789abcdef");
    assert_eq!(st["messageCount"], 2);
    let msgs = agent.request(json!({"type": "get_messages"}));
    assert_eq!(
        msgs["data"]["messages"][1]["content"][0]["text"],
        "earlier reply"
    );
    agent.send(json!({"id": "p", "type": "prompt", "message": "next"}));
    agent.until_type("agent_settled");
    let entries = agent.request(json!({"type": "get_entries", "since": "aaaa0002"}));
    let fresh = entries["data"]["entries"].as_array().unwrap();
    assert_eq!(
        fresh.len(),
        3,
        "thinking_level_change, user, assistant: {fresh:?}"
    );
    assert_eq!(fresh[0]["type"], "thinking_level_change");
    assert_eq!(fresh[0]["parentId"], "aaaa0002");
    assert_eq!(entries["data"]["leafId"], fresh[2]["id"]);
    let tree = agent.request(json!({"type": "get_tree"}));
    assert_eq!(tree["data"]["tree"].as_array().unwrap().len(), 1);
    agent.finish();
    let lines = read_jsonl(&session);
    assert_eq!(lines[0], header, "the header is kept as written");
    assert_eq!(lines.len(), 6);
    assert_chain(&lines[1..]);
}

#[test]
fn get_state_is_answered_while_a_turn_runs() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [[{"ui": "input", "title": "gate"}, {"text": "slow"}]]});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--no-session"]));
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    let got = agent.until_type("extension_ui_request");
    assert_eq!(
        labels(&got[..3]),
        ["response:prompt", "agent_start", "turn_start"]
    );
    let gate = got.last().unwrap()["id"].clone();
    agent.send(json!({"id": "s", "type": "get_state"}));
    let got = agent.response("s");
    assert!(
        !got.iter().any(|v| v["type"] == "agent_end"),
        "get_state waited for the turn: {got:?}"
    );
    let st = &got.last().unwrap()["data"];
    assert_eq!(st["isStreaming"], true);
    assert_eq!(st["pendingMessageCount"], 0);
    assert!(st.get("sessionFile").is_none(), "--no-session has no file");
    assert!(st["sessionId"].as_str().unwrap().len() == 36);
    assert_eq!(st["messageCount"], 2, "system and user so far");
    agent.send(json!({"type": "extension_ui_response", "id": gate, "value": "x"}));
    let got = agent.until_type("agent_settled");
    assert_eq!(assistant_texts(&got), ["slow"]);
    let st = agent.state();
    assert_eq!(st["isStreaming"], false);
    assert_eq!(st["messageCount"], 3);
}

#[test]
fn steer_and_follow_up_are_queued_into_the_running_run() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [
        [{"ui": "confirm", "title": "gate"}, {"text": "first"}],
        "steered: {prompt}",
        "followed: {prompt}"
    ]});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--no-session"]));
    agent.send(json!({"id": "p1", "type": "prompt", "message": "go"}));
    // The run waits on a dialog (a deterministic gate) while messages are queued.
    let gate = agent.until_type("extension_ui_request").pop().unwrap();

    let busy = agent.request(json!({"type": "prompt", "message": "busy"}));
    assert_eq!(busy["success"], false);
    assert_eq!(
        busy["error"],
        "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."
    );
    let f1 = agent.request(json!({"type": "follow_up", "message": "later"}));
    assert_eq!(f1["data"]["disposition"], "queued");
    let p3 = agent
        .request(json!({"type": "prompt", "message": "later2", "streamingBehavior": "followUp"}));
    assert_eq!(p3["data"]["disposition"], "queued");
    let s1 = agent.request(json!({"type": "steer", "message": "now"}));
    assert_eq!(s1["command"], "steer");
    assert_eq!(s1["data"]["disposition"], "queued");
    let st = agent.state();
    assert_eq!(st["pendingMessageCount"], 3);
    assert_eq!(st["isStreaming"], true);
    agent.send(json!({"type": "extension_ui_response", "id": gate["id"], "confirmed": true}));

    let got = agent.until_type("agent_settled");
    assert_eq!(got.iter().filter(|v| v["type"] == "agent_end").count(), 1);
    assert_eq!(user_texts(&got), ["now", "later", "later2"]);
    assert_eq!(
        assistant_texts(&got),
        ["first", "steered: now", "followed: later", "done: later2"]
    );
    // The steering message arrives at the next turn boundary.
    let l = labels(&got);
    let first_end = l.iter().position(|x| x == "message_end:assistant").unwrap();
    assert_eq!(
        &l[first_end..first_end + 4],
        [
            "message_end:assistant",
            "turn_end",
            "turn_start",
            "queue_update"
        ]
    );
    let last_queue = got
        .iter()
        .rev()
        .find(|v| v["type"] == "queue_update")
        .unwrap();
    assert_eq!(last_queue["steering"], json!([]));
    assert_eq!(last_queue["followUp"], json!([]));
    assert_eq!(agent.state()["pendingMessageCount"], 0);
}

#[test]
fn idle_steer_starts_a_run_and_clear_queue_empties_the_queues() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [[{"ui": "confirm", "title": "gate"}, {"text": "a"}], "b"]});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--no-session"]));
    agent.send(json!({"id": "s", "type": "steer", "message": "hello"}));
    let got = agent.until_type("extension_ui_request");
    assert_eq!(got[0]["data"]["disposition"], "started");
    assert_eq!(got[1]["type"], "agent_start");
    agent.request(json!({"type": "follow_up", "message": "x"}));
    let cleared = agent.request(json!({"type": "clear_queue"}));
    assert_eq!(cleared["data"], json!({"steering": [], "followUp": ["x"]}));
    let gate = &got.last().unwrap()["id"];
    agent.send(json!({"type": "extension_ui_response", "id": gate, "cancelled": true}));
    let got = agent.until_type("agent_settled");
    assert_eq!(assistant_texts(&got), ["a"]);
}

#[test]
fn abort_stops_the_turn_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [[
        {"text": "x".repeat(200), "deltas": 100, "delta_delay_ms": 50}
    ]]});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--no-session"]));
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.until("a text delta", |v| label(v) == "text_delta");
    let t0 = Instant::now();
    agent.send(json!({"id": "a1", "type": "abort"}));
    let got = agent.response("a1");
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(
        labels(&got[got.len() - 5..]),
        [
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled",
            "response:abort"
        ]
    );
    let end = &got[got.len() - 5]["message"];
    assert_eq!(end["stopReason"], "aborted");
    assert_eq!(end["errorMessage"], "Request was aborted");
    let partial = end["content"][0]["text"].as_str().unwrap();
    assert!(!partial.is_empty() && partial.len() < 200, "{partial}");
    assert_eq!(got[got.len() - 2]["aborted"], true);
    assert_eq!(got.last().unwrap()["success"], true);
    assert_eq!(agent.state()["isStreaming"], false);
    // The agent keeps serving: the next prompt gets the default reply.
    agent.send(json!({"id": "p2", "type": "prompt", "message": "again"}));
    let got = agent.until_type("agent_settled");
    assert_eq!(assistant_texts(&got), ["done: again"]);
    // Abort while idle answers at once.
    assert_eq!(agent.request(json!({"type": "abort"}))["success"], true);
}

#[test]
fn abort_during_a_tool_ends_like_pi() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [[
        {"tool": "bash", "args": {"command": "sleep 5"}, "result": "r", "duration_ms": 5000}
    ]]});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--no-session"]));
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.until_type("tool_execution_start");
    agent.send(json!({"id": "a", "type": "abort"}));
    let got = agent.response("a");
    let aborted_answer = [
        "message_end:assistant",
        "turn_end",
        "agent_end",
        "agent_settled",
        "response:abort",
    ];
    assert_eq!(labels(&got), [&AFTER_A_TOOL[..], &aborted_answer].concat());
    assert_eq!(got[0]["isError"], true);
    assert_eq!(got[0]["result"]["content"][0]["text"], "Operation aborted");
    assert_eq!(got[6]["message"]["stopReason"], "aborted");
    assert_eq!(got[6]["message"]["content"], json!([]));
}

#[test]
fn ignore_abort_keeps_running_until_the_turn_ends() {
    let dir = tempfile::tempdir().unwrap();
    let script =
        json!({"ignore_abort": true, "turns": [[{"delay_ms": 800}, {"text": "finished anyway"}]]});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--no-session"]));
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.until_type("agent_start");
    agent.send(json!({"id": "a", "type": "abort"}));
    let got = agent.response("a");
    assert_eq!(assistant_texts(&got), ["finished anyway"]);
    let settled = got.iter().find(|v| v["type"] == "agent_settled").unwrap();
    assert_eq!(settled["aborted"], false);
}

#[test]
fn ui_dialogs_wait_for_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [
        [{"ui": "notify", "title": "hello"},
         {"ui": "confirm", "title": "Proceed?", "message": "Really?"},
         {"text": "confirmed={ui}"}],
        [{"ui": "select", "title": "Pick", "options": ["A", "B"], "timeout": 200},
         {"text": "picked={ui}"}],
        [{"ui": "input", "title": "Name?", "placeholder": "..."}, {"text": "name={ui}"}]
    ]});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--no-session"]));
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    let got = agent.until("the confirm dialog", |v| {
        v["type"] == "extension_ui_request" && v["method"] == "confirm"
    });
    let notify = got
        .iter()
        .find(|v| v["type"] == "extension_ui_request" && v["method"] == "notify")
        .unwrap();
    assert_eq!(notify["message"], "hello");
    let confirm = got.last().unwrap().clone();
    assert_eq!(confirm["title"], "Proceed?");
    assert_eq!(confirm["message"], "Really?");
    assert!(confirm.get("timeout").is_none());
    let ui_id = confirm["id"].as_str().unwrap().to_string();
    assert_ne!(ui_id, notify["id"].as_str().unwrap());
    // Nothing happens until the host answers; an unknown id is ignored and never answered.
    agent.send(json!({"type": "extension_ui_response", "id": "nope", "confirmed": false}));
    assert!(agent.next(Duration::from_millis(400)).is_none());
    assert_eq!(agent.state()["isStreaming"], true);
    agent.send(json!({"type": "extension_ui_response", "id": ui_id, "confirmed": true}));
    let got = agent.until_type("agent_settled");
    assert_eq!(assistant_texts(&got), ["confirmed=true"]);

    // A dialog with a timeout resolves as cancelled by itself.
    agent.send(json!({"id": "p2", "type": "prompt", "message": "pick"}));
    let got = agent.until_type("agent_settled");
    let select = got
        .iter()
        .find(|v| v["type"] == "extension_ui_request")
        .unwrap();
    assert_eq!(select["options"], json!(["A", "B"]));
    assert_eq!(select["timeout"], 200);
    assert_eq!(assistant_texts(&got), ["picked=cancelled"]);

    agent.send(json!({"id": "p3", "type": "prompt", "message": "name"}));
    let got = agent.until_type("extension_ui_request");
    let id = got.last().unwrap()["id"].clone();
    agent.send(json!({"type": "extension_ui_response", "id": id, "value": "Ada"}));
    let got = agent.until_type("agent_settled");
    assert_eq!(assistant_texts(&got), ["name=Ada"]);
}

#[test]
fn crash_and_exit_steps_end_the_process_mid_turn() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [[{"text": "bye"}, {"crash": true}]]});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--no-session"]));
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.until("the assistant message", |v| {
        label(v) == "message_end:assistant"
    });
    let status = agent.wait_exit(WAIT);
    assert_eq!(status.signal(), Some(9), "{status:?}");
    assert!(!agent.rest().iter().any(|v| v["type"] == "turn_end"));

    let script = json!({"turns": [[{"stderr": "about to exit"}, {"exit": 3}]]});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--no-session"]));
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.until_type("agent_start");
    assert_eq!(agent.wait_exit(WAIT).code(), Some(3));
    let rest = agent.rest();
    assert!(!rest.iter().any(|v| v["type"] == "agent_end"), "{rest:?}");
    agent.wait_stderr("about to exit");
}

#[test]
fn error_step_ends_the_run_with_stop_reason_error() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"turns": [[{"error": "500: {\"error\":\"boom\"}"}, {"text": "never"}]]});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--no-session"]));
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    let got = agent.until_type("agent_settled");
    let end = got
        .iter()
        .find(|v| label(v) == "message_end:assistant")
        .unwrap();
    assert_eq!(end["message"]["stopReason"], "error");
    assert_eq!(end["message"]["errorMessage"], "500: {\"error\":\"boom\"}");
    assert_eq!(end["message"]["content"], json!([]));
    assert_eq!(
        labels(&got[got.len() - 4..]),
        [
            "message_end:assistant",
            "turn_end",
            "agent_end",
            "agent_settled"
        ]
    );
    assert_eq!(got.last().unwrap()["aborted"], false);
}

#[test]
fn stdin_eof_exits_zero_idle_and_busy() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::spawn(dir.path(), &json!({}), &rpc_args(&["--no-session"]));
    agent.state();
    agent.finish();

    let script = json!({"turns": [[{"delay_ms": 20000}, {"text": "never"}]]});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--no-session"]));
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.until_type("agent_start");
    let t0 = Instant::now();
    agent.finish();
    assert!(t0.elapsed() < Duration::from_secs(3));
}

#[test]
fn protocol_errors_look_like_pi() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"reject_prompts": "No API key found for fake."});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--no-session"]));
    agent.send_raw("this is not json\r\n");
    let parse = agent.until_type("response").pop().unwrap();
    assert!(parse.get("id").is_none());
    assert_eq!(parse["command"], "parse");
    assert_eq!(parse["success"], false);
    assert!(parse["error"]
        .as_str()
        .unwrap()
        .starts_with("Failed to parse command: "));
    agent.send(json!({"id": "u1", "type": "bogus"}));
    let r = agent.response("u1").pop().unwrap();
    assert_eq!(
        r,
        json!({"id": "u1", "type": "response", "command": "bogus", "success": false, "error": "Unknown command: bogus"})
    );
    let r = agent.request(json!({"type": "prompt", "message": "hi"}));
    assert_eq!(r["success"], false);
    assert_eq!(r["error"], "No API key found for fake.");
    assert_eq!(agent.state()["isStreaming"], false);
    let r = agent.request(json!({"type": "set_session_name", "name": "  "}));
    assert_eq!(r["error"], "Session name cannot be empty");
    agent.send(json!({"id": "n", "type": "set_session_name", "name": "renamed"}));
    let got = agent.response("n");
    assert_eq!(
        labels(&got),
        ["session_info_changed", "response:set_session_name"]
    );
    assert!(got[1].get("data").is_none());
    assert_eq!(agent.state()["sessionName"], "renamed");
    // The line separators U+2028/U+2029 do not split a command.
    let r = agent.request(json!({"type": "bash", "command": "printf 'a\u{2028}b'"}));
    assert_eq!(r["data"]["output"], "a\u{2028}b");
    assert_eq!(r["data"]["exitCode"], 0);
}

#[test]
fn unknown_flags_fail_at_startup_with_exit_1_and_no_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::spawn(dir.path(), &json!({}), &rpc_args(&["--bogus-flag"]));
    assert_eq!(agent.wait_exit(WAIT).code(), Some(1));
    assert!(agent.rest().is_empty());
    agent.wait_stderr("Error: Unknown option: --bogus-flag");

    let mut agent = Agent::spawn(
        dir.path(),
        &json!({"startup_stderr": "No models available", "startup_exit": 1}),
        &rpc_args(&[]),
    );
    assert_eq!(agent.wait_exit(WAIT).code(), Some(1));
    assert!(agent.rest().is_empty());
    agent.wait_stderr("No models available");
}

#[test]
fn sigterm_exits_143_unless_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::spawn(dir.path(), &json!({}), &rpc_args(&["--no-session"]));
    agent.state();
    kill_process(agent.pid(), Signal::TERM).unwrap();
    assert_eq!(agent.wait_exit(WAIT).code(), Some(143));

    let mut agent = Agent::spawn(
        dir.path(),
        &json!({"ignore_sigterm": true}),
        &rpc_args(&["--no-session"]),
    );
    agent.state();
    kill_process(agent.pid(), Signal::TERM).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        agent.child.try_wait().unwrap().is_none(),
        "SIGTERM was ignored"
    );
    assert_eq!(agent.state()["isStreaming"], false);
    agent.wait_stderr("ignoring SIGTERM");
    kill_process(agent.pid(), Signal::KILL).unwrap();
    assert_eq!(agent.wait_exit(WAIT).signal(), Some(9));
}

#[test]
fn grandchild_shares_the_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Agent::spawn(
        dir.path(),
        &json!({"spawn_grandchild": true}),
        &rpc_args(&["--no-session"]),
    );
    agent.state();
    let stderr = agent.wait_stderr("grandchild pid");
    let pid: i32 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("scripted-agent: grandchild pid "))
        .unwrap_or_else(|| panic!("no grandchild pid in {stderr:?}"))
        .trim()
        .parse()
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name: state, ppid, pgrp.
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    assert_eq!(fields[1].parse::<u32>().unwrap(), agent.child.id(), "ppid");
    assert_eq!(fields[2].parse::<u32>().unwrap(), agent.child.id(), "pgrp");
    kill_process_group(agent.pid(), Signal::KILL).unwrap();
    agent.wait_exit(WAIT);
    let deadline = Instant::now() + WAIT;
    loop {
        let gone = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(s) => s[s.rfind(')').unwrap() + 2..].starts_with('Z'),
        };
        if gone {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "grandchild {pid} survived the group kill"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Like Pi 1.6 (verified): a `prompt` read while another one's preflight runs is answered
/// `started` too and never runs; its `agent_settled` follows the run's `agent_start`, and
/// `isStreaming` reads false for the rest of that run. One written after the answer is queued.
#[test]
fn a_prompt_written_before_the_last_one_was_answered_is_dropped_as_pi_does() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"preflight_ms": 200, "turns": [
        [{"ui": "confirm", "title": "gate"}, {"text": "first"}],
        [{"ui": "confirm", "title": "gate 2"}, {"text": "second: {prompt}"}]
    ]});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--no-session"]));
    agent.send(json!({"id": "p1", "type": "prompt", "message": "one"}));
    agent.send(
        json!({"id": "p2", "type": "prompt", "message": "two", "streamingBehavior": "followUp"}),
    );
    let got = agent.until_type("extension_ui_request");
    assert_eq!(
        labels(&got[..5]),
        [
            "response:prompt",
            "response:prompt",
            "agent_start",
            "agent_settled",
            "turn_start"
        ]
    );
    assert_eq!((&got[0]["id"], &got[1]["id"]), (&json!("p1"), &json!("p2")));
    assert_eq!(got[1]["data"]["disposition"], "started");
    assert_eq!(user_texts(&got), ["one"]);
    let gate = got.last().unwrap()["id"].clone();
    let st = agent.state();
    assert_eq!(
        (
            st["isStreaming"].as_bool(),
            st["pendingMessageCount"].as_u64()
        ),
        (Some(false), Some(0)),
        "the dropped prompt cleared the run flag"
    );
    // With the flag cleared, a plain prompt "starts" and is dropped as well.
    let late = agent.request(json!({"type": "prompt", "message": "late"}));
    assert_eq!(late["data"]["disposition"], "started");
    assert_eq!(agent.next(WAIT).unwrap()["type"], "agent_settled");
    agent.send(json!({"type": "extension_ui_response", "id": gate, "confirmed": true}));
    let got = agent.until_type("agent_settled");
    assert_eq!(
        user_texts(&got),
        Vec::<String>::new(),
        "two and late never run"
    );
    assert_eq!(assistant_texts(&got), ["first"]);

    // Written after the answer, a follow-up is queued into the run and delivered.
    let p3 = agent.request(json!({"type": "prompt", "message": "three"}));
    assert_eq!(p3["data"]["disposition"], "started");
    let gate = agent.until_type("extension_ui_request").pop().unwrap()["id"].clone();
    let p4 = agent
        .request(json!({"type": "prompt", "message": "four", "streamingBehavior": "followUp"}));
    assert_eq!(p4["data"]["disposition"], "queued");
    agent.send(json!({"type": "extension_ui_response", "id": gate, "confirmed": true}));
    let got = agent.until_type("agent_settled");
    assert_eq!(user_texts(&got), ["four"], "three came before the gate");
    assert_eq!(assistant_texts(&got), ["second: three", "done: four"]);
    assert_eq!(
        agent.state()["messageCount"],
        7,
        "system, one, first, three, four and replies"
    );
}

/// Like Pi 1.6 (verified): an `abort` that arrives during a prompt's preflight is answered at
/// once and the prompt's run starts anyway.
#[test]
fn an_abort_during_a_prompt_preflight_does_not_stop_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let script = json!({"preflight_ms": 200, "turns": ["ran anyway"]});
    let mut agent = Agent::spawn(dir.path(), &script, &rpc_args(&["--no-session"]));
    agent.send(json!({"id": "p", "type": "prompt", "message": "go"}));
    agent.send(json!({"id": "a", "type": "abort"}));
    let got = agent.until_type("agent_settled");
    assert_eq!(
        labels(&got[..3]),
        ["response:abort", "response:prompt", "agent_start"]
    );
    assert_eq!(assistant_texts(&got), ["ran anyway"]);
    assert_eq!(got.last().unwrap()["aborted"], false);
}
