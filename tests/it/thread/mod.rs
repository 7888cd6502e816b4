//! Contract A, the `thread` tool, through a real `threadbase serve` process whose children are
//! `threadbase scripted-agent` processes. A file for each action whose behaviour its tests
//! assert (`start`, `poll`, `wait`, `list`, `stop`), `tour` for the tests that cross every
//! action, and `stdio` for serve's pipes and sockets; the world and the helpers they share
//! are here.
//!
//! The `golden_*` tests are ported from pi-threads (phongndo/pi-threads, test/*.test.ts). The
//! originals drive a mocked manager or a fake child; these drive a real serve and scripted
//! children to the same states and assert the same facts. Where threadbase deliberately differs
//! (docs/fidelity.md, "Contract A"), the comment says so and threadbase's documented behaviour
//! is asserted.

#[allow(unused_imports)]
use crate::support::sql::Rusqlite as _;
mod list;
mod poll;
mod reads;
mod start;
mod states;
mod stdio;
mod stop;
mod tour;
mod wait;

use crate::support::common;
use crate::support::serve_client;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use serve_client::{scripted_command, Scripted, Serve};

struct World {
    base: Scripted,
    parent_session: PathBuf,
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

/// `n` closed threads `/root/t_0000`, … of the manager serve made for `ses_parent` (serve must
/// have answered a request), written straight into the database.
fn seed_closed_threads(db: &Path, n: u64) {
    let store = threadbase::Store::open(db).unwrap();
    let manager: threadbase::domain::ManagerId = store
        .read()
        .unwrap()
        .query_row(
            "SELECT id FROM managers WHERE session_id = 'ses_parent' AND contract = 'thread'",
            (),
            |r| r.get(0),
        )
        .unwrap();
    let rows: Vec<_> = (0..n)
        .map(|i| common::thread(&common::tid(i), manager, &format!("/root/t_{i:04}"), false))
        .collect();
    common::add(&store, &rows);
}
