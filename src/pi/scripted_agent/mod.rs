//! `threadbase scripted-agent --script FILE [PI FLAGS…]`: a stand-in for `pi --mode rpc` (Pi 1.6
//! dialect) that follows a JSON script instead of calling an LLM. The runtime supervises it exactly
//! like real Pi: same framing, commands, responses, event shapes and order, extension UI
//! sub-protocol, idle/busy signals, session file and exit behaviour (see `reference/pi-rpc.md`).
//! It exists for fast deterministic tests and for `threadbase demo`.
//!
//! # Process model
//!
//! [`run`] reads JSON lines from stdin and writes JSON lines to stdout. A reader (the calling
//! thread) answers commands at once, concurrently with a running agent run, which a worker thread
//! plays from the script; both write stdout through one lock, one whole line at a time. Stdin EOF
//! makes [`run`] return `Ok(())` (the caller exits 0, like Pi); output of a run still in flight is
//! suppressed from that moment. Startup failures that Pi reports with exit 1 and nothing on stdout
//! (unknown flag, `@file` argument, `--fork` with `--session`, a resumed session whose stored cwd
//! is gone, an unreadable session file) are reproduced the same way: a message on stderr and
//! `exit(1)` from inside [`run`]. A script that cannot be read or parsed is an `Err`.
//!
//! SIGTERM exits 143 and SIGHUP exits 129 (Pi's graceful shutdown); SIGINT keeps the default
//! action. The handlers use tokio's signal support (already a dependency of the crate) on one small
//! helper thread; nothing else uses tokio.
//!
//! # Files
//!
//! `script.rs` reads the script (its format is documented there), `args.rs` the Pi flags,
//! `session.rs` keeps the session file, `dispatch.rs` answers commands and `run_loop.rs` plays
//! runs (events, tools, dialogs, aborts). This file holds what they share: the state behind one lock,
//! the stdout writer, signals and the process's start.
//!
//! # Not modelled
//!
//! Real model calls and real tools (tool results are scripted; only the RPC `bash` command runs
//! for real); auto-retry and auto-compaction (never triggered, `willRetry` is always false);
//! `compact`, `new_session`, `switch_session`, `fork`, `clone` and `export_html` answer
//! `success:false` (`… is not supported by the scripted agent`); extension loading, extension
//! commands and the `handled` disposition; images are stored but not looked at; `entry_appended` is
//! emitted only for `custom_entry` steps; the exact shape of 1.6's system message `sections` is not
//! recorded in the reference, so the one emitted here is a plausible stand-in; an idle
//! `steer`/`follow_up` starts a run (disposition `started`), which the reference implies but did not
//! verify; steering is only checked between assistant messages (not between the tool calls of one
//! message); `--session` with an id prefix, `--continue`, `--resume` and `--fork` are not
//! searched for (a fresh in-memory or given-path session is used).

mod args;
mod dispatch;
mod run_loop;
mod script;
mod session;

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use self::args::Args;
use self::script::Script;
use self::session::{session_has_assistant, Session};
use crate::error::{Error, Result};
use crate::pi::flags::THINKING_LEVELS;

/// Runs the scripted agent: `script_path` is the JSON script, `argv` the Pi flags that follow it.
/// Returns on stdin EOF; a scripted `exit`/`crash`, a signal or a Pi-style startup failure ends the
/// process from inside.
/// `pi --list-models`' table: `provider  model  context  max-out  thinking  images`.
fn list_models_table(models: &[(String, String, bool)]) -> String {
    if models.is_empty() {
        return "No models available. Use /login or set an API key environment variable.\n".into();
    }
    let pw = models.iter().map(|m| m.0.len()).max().unwrap_or(0).max(8);
    let mw = models.iter().map(|m| m.1.len()).max().unwrap_or(0).max(5);
    let mut out = format!(
        "{:pw$}  {:mw$}  context  max-out  thinking  images\n",
        "provider", "model"
    );
    for (p, id, reasoning) in models {
        out.push_str(&format!(
            "{p:pw$}  {id:mw$}  128K     16.4K    {:8}  no    \n",
            if *reasoning { "yes" } else { "no" }
        ));
    }
    out
}

pub fn run(script_path: &Path, argv: &[String]) -> Result<()> {
    let script = Script::load(script_path)?;
    if let Some(text) = &script.startup_stderr {
        write_stderr(text);
    }
    if let Some(code) = script.startup_exit {
        std::process::exit(code);
    }
    // `--list-models`: Pi prints the models that have credentials, one table, and exits.
    if argv.iter().any(|a| a == "--list-models") {
        print!("{}", list_models_table(&script.list_models));
        std::process::exit(0);
    }
    let args = match Args::parse(argv) {
        Ok(a) => a,
        Err(msg) => startup_failure(&msg),
    };
    for w in &args.warnings {
        write_stderr(w);
    }
    let session = match Session::open(&args, &script) {
        Ok(s) => s,
        Err(msg) => startup_failure(&msg),
    };
    let shared = Arc::new(Shared::new(script, args, session));
    shared.install_signal_handlers();
    shared.spawn_grandchild();
    if shared.script.startup_delay_ms > 0 {
        std::thread::sleep(Duration::from_millis(shared.script.startup_delay_ms));
    }
    {
        let sh = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("scripted-agent-worker".into())
            .spawn(move || run_loop::worker(&sh))
            .map_err(|e| Error::internal(format!("cannot start the worker thread: {e}")))?;
    }
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match input.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
        if buf.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        shared.handle_line(&buf);
    }
    shared.shutdown();
    Ok(())
}

fn startup_failure(msg: &str) -> ! {
    write_stderr(msg);
    std::process::exit(1);
}

fn write_stderr(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = err.write_all(b"\n");
    }
    let _ = err.flush();
}

#[derive(Debug, Clone)]
struct UserInput {
    text: String,
    images: Vec<Value>,
    /// Taken from a queue (`Some(true)`: follow-up, `Some(false)`: steering).
    queued: Option<bool>,
}

struct State {
    streaming: bool,
    run_request: Option<Vec<UserInput>>,
    abort_requested: bool,
    /// Ids (or absence of one) of `abort` commands waiting for the run to end.
    abort_waiters: Vec<Option<Value>>,
    steering: VecDeque<UserInput>,
    follow_up: VecDeque<UserInput>,
    steering_mode: String,
    follow_up_mode: String,
    auto_compaction: bool,
    pending_ui: HashSet<String>,
    ui_answers: HashMap<String, Value>,
    last_ui: String,
    session: Session,
    provider: String,
    model_id: String,
    thinking_level: String,
    turn_cursor: usize,
    tool_counter: u64,
    response_counter: u64,
    shutdown: bool,
    /// A prompt is in its preflight: it has not started its run nor been answered yet.
    preflight_pending: bool,
    /// Ids of prompts that arrived during that preflight: answered `started` after it, never
    /// run (see [`Shared::cmd_input`]).
    overlapped: Vec<Option<Value>>,
    /// `agent_settled` events owed for dropped prompts, emitted after the run's `agent_start`.
    lost_settles: usize,
    /// A dropped prompt cleared Pi's run flag: `isStreaming` reads false until the run ends.
    streaming_reset: bool,
}

struct Out {
    closed: bool,
}

struct Shared {
    script: Script,
    st: Mutex<State>,
    cv: Condvar,
    out: Mutex<Out>,
}

impl Shared {
    fn new(script: Script, args: Args, mut session: Session) -> Shared {
        let (mut provider, mut model_id) = (
            script.provider.clone().unwrap_or_else(|| "scripted".into()),
            script
                .model
                .clone()
                .unwrap_or_else(|| "scripted-model".into()),
        );
        let mut thinking = args.thinking.clone();
        if let Some(m) = &args.model {
            let mut m = m.clone();
            if let Some((base, level)) = m.rsplit_once(':') {
                if THINKING_LEVELS.contains(&level) {
                    if thinking.is_none() {
                        thinking = Some(level.to_string());
                    }
                    m = base.to_string();
                }
            }
            match (&args.provider, m.split_once('/')) {
                (Some(p), _) => {
                    provider = p.clone();
                    model_id = m;
                }
                (None, Some((p, id))) => {
                    provider = p.to_string();
                    model_id = id.to_string();
                }
                (None, None) => model_id = m,
            }
        }
        let thinking_level = thinking.unwrap_or_else(|| "off".into());
        // Entries Pi writes when it opens the session.
        let resumed = !session.entries.is_empty() || session.writer.is_some();
        if !resumed || !(session.path_has("model_change") || session_has_assistant(&session)) {
            let mut f = Map::new();
            f.insert("provider".into(), Value::String(provider.clone()));
            f.insert("modelId".into(), Value::String(model_id.clone()));
            session.append("model_change", f);
        }
        if !resumed || !session.path_has("thinking_level_change") {
            let mut f = Map::new();
            f.insert(
                "thinkingLevel".into(),
                Value::String(thinking_level.clone()),
            );
            session.append("thinking_level_change", f);
        }
        if let Some(name) = args.name.as_ref().filter(|n| !n.trim().is_empty()) {
            let mut f = Map::new();
            f.insert("name".into(), Value::String(name.trim().to_string()));
            session.append("session_info", f);
            session.name = Some(name.trim().to_string());
        }
        Shared {
            st: Mutex::new(State {
                streaming: false,
                run_request: None,
                abort_requested: false,
                abort_waiters: Vec::new(),
                steering: VecDeque::new(),
                follow_up: VecDeque::new(),
                steering_mode: "one-at-a-time".into(),
                follow_up_mode: "one-at-a-time".into(),
                auto_compaction: true,
                pending_ui: HashSet::new(),
                ui_answers: HashMap::new(),
                last_ui: String::new(),
                session,
                provider,
                model_id,
                thinking_level,
                turn_cursor: 0,
                tool_counter: 0,
                response_counter: 0,
                shutdown: false,
                preflight_pending: false,
                overlapped: Vec::new(),
                lost_settles: 0,
                streaming_reset: false,
            }),
            cv: Condvar::new(),
            out: Mutex::new(Out { closed: false }),
            script,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_out(&self) -> MutexGuard<'_, Out> {
        self.out.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes one JSON line to stdout, atomically with respect to every other writer.
    fn emit(&self, value: &Value) {
        let mut out = self.lock_out();
        if out.closed {
            return;
        }
        let mut line = value.to_string();
        line.push('\n');
        let mut stdout = std::io::stdout().lock();
        if stdout
            .write_all(line.as_bytes())
            .and_then(|_| stdout.flush())
            .is_err()
        {
            out.closed = true;
        }
    }

    fn shutdown(&self) {
        let mut st = self.lock();
        st.shutdown = true;
        st.session.write_failed = true; // no more session writes from a run still in flight
        self.lock_out().closed = true;
        drop(st);
        self.cv.notify_all();
    }

    /// Ends the process with `code` once no line is half written.
    fn exit_now(&self, code: i32) -> ! {
        let deadline = Instant::now() + Duration::from_secs(1);
        let guard = loop {
            match self.out.try_lock() {
                Ok(g) => break Some(g),
                Err(std::sync::TryLockError::Poisoned(p)) => break Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(_) => break None,
            }
        };
        let _ = std::io::stdout().flush();
        let _held = guard; // never released: nobody writes after this point
        std::process::exit(code);
    }

    fn install_signal_handlers(self: &Arc<Self>) {
        let sh = Arc::clone(self);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("scripted-agent-signals".into())
            .spawn(move || {
                use tokio::signal::unix::{signal, SignalKind};
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    let _ = tx.send(());
                    return;
                };
                rt.block_on(async move {
                    let term = signal(SignalKind::terminate());
                    let hup = signal(SignalKind::hangup());
                    let _ = tx.send(());
                    let (Ok(mut term), Ok(mut hup)) = (term, hup) else {
                        return;
                    };
                    loop {
                        tokio::select! {
                            _ = term.recv() => {
                                if sh.script.ignore_sigterm {
                                    write_stderr("scripted-agent: ignoring SIGTERM (ignore_sigterm)");
                                } else {
                                    sh.exit_now(143);
                                }
                            }
                            _ = hup.recv() => sh.exit_now(129),
                        }
                    }
                });
            });
        if spawned.is_ok() {
            // Wait until the handlers are in place, so an early SIGTERM is not the default action.
            let _ = rx.recv_timeout(Duration::from_secs(5));
        }
    }

    fn spawn_grandchild(&self) {
        let Some(argv) = &self.script.grandchild else {
            return;
        };
        let spawned = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        match spawned {
            Ok(child) => {
                write_stderr(&format!("scripted-agent: grandchild pid {}", child.id()));
                // Not waited for, like processes spawned by Pi's extensions.
                std::mem::forget(child);
            }
            Err(e) => write_stderr(&format!(
                "scripted-agent: cannot spawn grandchild {:?}: {e}",
                argv
            )),
        }
    }

    fn aborting(&self, st: &State) -> bool {
        st.shutdown || (st.abort_requested && !self.script.ignore_abort)
    }

    /// Waits up to `ms`; true if the run was aborted meanwhile.
    fn wait_ms(&self, ms: u64) -> bool {
        let deadline = Instant::now() + Duration::from_millis(ms);
        let mut st = self.lock();
        loop {
            if self.aborting(&st) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            st = self
                .cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn model_json(&self, st: &State) -> Value {
        json!({
            "id": st.model_id,
            "name": st.model_id,
            "api": "openai-completions",
            "provider": st.provider,
            "baseUrl": "http://127.0.0.1/scripted-agent",
            "reasoning": true,
            "input": ["text", "image"],
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
            "contextWindow": 128000,
            "maxTokens": 16384,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pi::session::uuid_v7;

    #[test]
    fn uuids_have_the_right_shape() {
        let v7 = uuid_v7();
        assert_eq!(v7.len(), 36);
        assert_eq!(&v7[14..15], "7");
        let v4 = run_loop::uuid_v4();
        assert_eq!(v4.len(), 36);
        assert_eq!(&v4[14..15], "4");
    }
}
