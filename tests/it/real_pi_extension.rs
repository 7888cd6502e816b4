//! End to end: real Pi 1.6 (the parent, RPC mode) loads `pi-extension/index.ts` and talks to
//! the scripted fake LLM. The scripted parent model calls the `thread` tool to start a child,
//! wait for it and poll it; the extension forwards the calls to `threadbase serve`, which runs a
//! real Pi child against the same fake. Then the parent's stdin is closed and the serve and the
//! child must go away on their own. Skips without Pi unless CI=true.

use crate::support::fake_llm;
use crate::support::pi_child;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fake_llm::{hermetic_pi_env, pi_or_skip, FakeLlm, PiEnv, Step};
use pi_child::{extension_dir, magic_word_fake, parent_pi_or_skip, sql, tool_ends, PiChild};
use pi_child::{one_parent_at_a_time as serial, CHILD_ANSWER};
use serde_json::{json, Value};

/// The parent's whole run: two Pi startups, three tool calls, the child's turn.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the parent may take to exit after stdin EOF.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the serve and the child may take to go away after the parent exited (graceful
/// stop: abort ≤ 1.5 s, SIGTERM, ≤ 1.5 s, SIGKILL).
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(20);

/// One hermetic run: the fake's environment, the database, the parent Pi with the extension.
struct World {
    /// The parent Pi; dropping it SIGKILLs its group (the serve is a member; the serve's
    /// children have groups of their own and carry the env marker).
    parent: PiChild,
    env: PiEnv,
    db: PathBuf,
    parent_session: PathBuf,
}

impl World {
    /// Starts the parent Pi with `-e <extension>` (a file or the extension directory).
    fn launch(pi: &[String], fake: &FakeLlm, extension: &Path) -> World {
        World::launch_with(pi, fake, extension, &[])
    }

    /// [`World::launch`] with more (or overriding) environment variables for the parent.
    fn launch_with(
        pi: &[String],
        fake: &FakeLlm,
        extension: &Path,
        more_vars: &[(&str, String)],
    ) -> World {
        let env = hermetic_pi_env(fake);
        assert!(
            env.args.iter().any(|a| a == "--no-extensions"),
            "the hermetic args block discovery; -e must still load the extension"
        );
        let db = env.root.path().join("db.sqlite");
        let parent_session = pi_child::parent_session(&env);
        // The child's argv prefix is just Pi: the hermetic flags (--offline, --provider,
        // --model, the no-discovery flags) and `--extension` reach it by inheritance from the
        // parent's argv (`--parent-args`), the hermetic environment through the serve's.
        let child_command = json!(pi).to_string();
        let parent = pi_child::spawn_parent(pi, &env, extension, &db, child_command, more_vars);
        World {
            parent,
            env,
            db,
            parent_session,
        }
    }

    /// Sends a prompt and reads records until `agent_settled`; returns the records of this run.
    fn run(&mut self, id: &str, message: &str) -> Vec<Value> {
        self.parent.run(id, message, RUN_TIMEOUT)
    }

    /// Closes the parent's stdin and expects the parent to exit 0 and, on their own, the serve
    /// and the children it started (every process carrying the env marker). `running`: how
    /// many marked processes must be alive before (parent, serve and children).
    fn shutdown(&mut self, running: usize) {
        assert!(
            self.env.leftover_processes().len() >= running,
            "parent, serve and children should be running: {:?}",
            self.env.leftover_processes()
        );
        self.parent.finish(EXIT_TIMEOUT);
        let leftovers = self.env.leftovers_after(CLEANUP_TIMEOUT);
        let described: Vec<String> = leftovers
            .iter()
            .map(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                format!(
                    "{pid}: {}",
                    String::from_utf8_lossy(&cmdline).replace('\0', " ")
                )
            })
            .collect();
        assert!(
            leftovers.is_empty(),
            "processes left {CLEANUP_TIMEOUT:?} after the parent exited: {described:#?}"
        );
    }

    /// Live `threadbase serve` processes of this run: (pid, value of `--session-id`).
    fn serves(&self) -> Vec<(u32, String)> {
        self.env
            .leftover_processes()
            .into_iter()
            .filter_map(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
                let argv: Vec<String> = cmdline
                    .split(|b| *b == 0)
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect();
                if !argv.iter().any(|a| a == "serve") {
                    return None;
                }
                let i = argv.iter().position(|a| a == "--session-id")?;
                Some((pid, argv.get(i + 1)?.clone()))
            })
            .collect()
    }

    fn thread_row(&self, path: &str) -> Value {
        let rows = sql(
            &self.db,
            &format!(
                "SELECT id, path, status, phase, exit_kind, session_file FROM threads WHERE path = '{path}'"
            ),
        );
        assert_eq!(rows.len(), 1, "{path}: {rows:#?}");
        rows[0].clone()
    }
}

impl Drop for World {
    /// SIGKILLs every process carrying the env's marker (cleanup after a failed assertion).
    fn drop(&mut self) {
        for pid in self.env.leftover_processes() {
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

#[test]
fn real_pi_parent_with_the_extension_starts_waits_for_and_polls_a_real_child() {
    let test = "real_pi_parent_with_the_extension_starts_waits_for_and_polls_a_real_child";
    let Some((pi, _serial)) = parent_pi_or_skip(test) else {
        return;
    };
    let started = Instant::now();

    // The parent's turns come from the queue in order; the child's single request normally
    // lands while the parent is blocked in `wait`.
    let fake = magic_word_fake([
        Step::tool_call("thread", json!({"action": "poll", "id": "magic"})),
        Step::text("Done."),
    ]);
    let mut w = World::launch(&pi, &fake, &extension_dir().join("index.ts"));
    let events = w.run("p1", "Use a background thread to find out the magic word.");
    let dump = w.parent.dump();

    // --- what the parent's tool calls returned -------------------------------------------
    let ends = tool_ends(&events, "thread");
    assert_eq!(ends.len(), 3, "three thread tool calls\n{dump}");
    for end in &ends {
        assert_eq!(end["isError"], false, "{end}\n{dump}");
    }
    let (start, wait, poll) = (&ends[0]["result"], &ends[1]["result"], &ends[2]["result"]);
    assert_eq!(start["details"]["kind"], "started", "{dump}");
    assert_eq!(
        start["details"]["snapshot"]["path"], "/root/magic",
        "{dump}"
    );
    // `null` when the child Pi took longer than the engine's prompt-answer wait (heavy load).
    assert_ne!(start["details"]["promptAccepted"], false, "{dump}");
    assert_eq!(wait["details"]["kind"], "waited", "{dump}");
    assert_eq!(wait["details"]["timedOut"], false, "{dump}");
    assert_eq!(poll["details"]["kind"], "polled", "{dump}");
    for (what, result) in [("wait", wait), ("poll", poll)] {
        assert!(
            fake_llm::content_text(&result["content"]).contains("xyzzy"),
            "the {what} result carries the child's answer: {result}\n{dump}"
        );
        assert_eq!(
            result["details"]["snapshot"]["resultSummary"], CHILD_ANSWER,
            "{what}: {result}"
        );
    }
    // Wait progress was streamed through onUpdate.
    let wait_call = ends[1]["toolCallId"].clone();
    let updates: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_update" && e["toolCallId"] == wait_call)
        .collect();
    assert!(!updates.is_empty(), "no wait progress update\n{dump}");
    assert_eq!(updates[0]["partialResult"]["details"]["kind"], "waiting");
    assert!(
        fake_llm::content_text(&updates[0]["partialResult"]["content"]).starts_with("Waiting ")
            && fake_llm::content_text(&updates[0]["partialResult"]["content"])
                .contains("ms for \"")
            && fake_llm::content_text(&updates[0]["partialResult"]["content"])
                .contains("\nPath: /root/magic\nStatus: live/")
            && fake_llm::content_text(&updates[0]["partialResult"]["content"])
                .contains("\nRunning: yes\nNext: "),
        "{}",
        updates[0]
    );
    let final_text = events
        .iter()
        .rev()
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
        .map(|e| fake_llm::content_text(&e["message"]["content"]));
    assert_eq!(final_text.as_deref(), Some("Done."), "{dump}");

    // --- what the models saw ----------------------------------------------------------------
    let requests = fake.completion_requests();
    assert_eq!(fake.remaining(), 0, "{requests:#?}");
    assert_eq!(fake.routes_remaining(), 0, "{requests:#?}");
    assert_eq!(requests.len(), 5, "{requests:#?}");
    let first = requests.iter().find(|r| r.step == Some(0)).unwrap();
    let tools = first.json()["tools"].clone();
    let thread_tool = tools
        .as_array()
        .and_then(|t| t.iter().find(|t| t["function"]["name"] == "thread"))
        .unwrap_or_else(|| panic!("no thread tool offered: {tools}"));
    // The description teaches the actions (its first sentence is the original's one line).
    let description = thread_tool["function"]["description"]
        .as_str()
        .unwrap_or_default();
    assert!(
        description.starts_with("Start and manage background Pi child sessions"),
        "{description}"
    );
    assert!(description.contains("- wait {id"), "{description}");
    let schema = &thread_tool["function"]["parameters"];
    assert_eq!(schema["required"], json!(["action"]), "{schema}");
    assert_eq!(
        schema["properties"]["action"]["enum"],
        json!(["start", "list", "poll", "send", "stop", "wait", "resume", "fork", "archive"]),
        "{schema}"
    );
    let fields: Vec<&str> = schema["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    for f in [
        "prompt",
        "name",
        "taskName",
        "args",
        "cwd",
        "state",
        "visibility",
        "parent",
        "ancestor",
        "id",
        "detail",
        "message",
        "mode",
        "force",
        "timeoutMs",
        "entryId",
        "position",
        "archived",
    ] {
        assert!(fields.contains(&f), "no {f} in {fields:?}");
    }
    let child_request = requests.iter().find(|r| r.route == Some(0)).unwrap();
    assert!(
        child_request.tool_names().iter().any(|t| t == "thread"),
        "the child inherited -e and offers the thread tool too: {:?}",
        child_request.tool_names()
    );
    let last = requests.iter().find(|r| r.step == Some(3)).unwrap();
    let tool_texts: Vec<String> = last
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| fake_llm::content_text(&m["content"]))
        .collect();
    assert_eq!(tool_texts.len(), 3, "{tool_texts:#?}");
    assert!(
        tool_texts[1].contains("xyzzy") && tool_texts[2].contains("xyzzy"),
        "the parent model saw the child's answer: {tool_texts:#?}"
    );

    // --- the database ---------------------------------------------------------------------------
    let row = w.thread_row("/root/magic");
    let thread_id = row["id"].as_str().unwrap().to_string();
    assert_eq!(row["status"], "live", "{row}");
    let kinds: Vec<String> = sql(
        &w.db,
        &format!("SELECT type FROM thread_events WHERE thread_id = '{thread_id}' ORDER BY seq"),
    )
    .iter()
    .map(|r| r["type"].as_str().unwrap().to_string())
    .collect();
    for k in ["thread_started", "turn_started", "assistant_message"] {
        assert!(kinds.iter().any(|x| x == k), "no {k} in {kinds:?}");
    }

    // --- the child's session file: a real Pi session linked to the parent -----------------
    let child_session = PathBuf::from(row["session_file"].as_str().expect("session_file"));
    let child_file = std::fs::read_to_string(&child_session)
        .unwrap_or_else(|e| panic!("read {}: {e}", child_session.display()));
    let header: Value = serde_json::from_str(child_file.lines().next().unwrap()).unwrap();
    assert_eq!(header["type"], "session", "{child_file}");
    assert_eq!(
        header["parentSession"].as_str(),
        Some(w.parent_session.to_str().unwrap()),
        "{child_file}"
    );
    assert!(child_file.contains(CHILD_ANSWER), "{child_file}");
    assert!(
        w.parent_session.is_file(),
        "the parent's session file exists"
    );

    // --- shutdown: the parent's stdin EOF closes the serve, which stops the child ----------
    w.shutdown(3);
    let row = w.thread_row("/root/magic");
    assert_eq!(
        row["status"], "closed",
        "the serve recorded the child's exit: {row}"
    );

    if std::env::var_os("THREADBASE_TEST_VERBOSE").is_some() {
        eprintln!("{dump}\n--- requests ---\n{:#?}", fake.requests());
    }
    eprintln!("real_pi_extension: passed in {:?}", started.elapsed());
}

/// Errors reach the model as tool errors; an abort ends a `wait` with `Thread wait aborted`
/// and leaves the child and the serve running; the extension also loads as a directory.
#[test]
fn real_pi_extension_reports_errors_and_an_aborted_wait_leaves_the_child_running() {
    let Some((pi, _serial)) = parent_pi_or_skip(
        "real_pi_extension_reports_errors_and_an_aborted_wait_leaves_the_child_running",
    ) else {
        return;
    };
    let started = Instant::now();
    let fake = FakeLlm::with_script([
        // Run 1: an unknown reference and an extra field: tool errors; then a start and a wait
        // that the test aborts.
        Step::tool_call("thread", json!({"action": "poll", "id": "nope"})),
        Step::tool_call("thread", json!({"action": "list", "prompt": "x"})),
        Step::tool_call(
            "thread",
            json!({"action": "start", "prompt": "Take your time.", "taskName": "slow"}),
        ),
        Step::tool_call(
            "thread",
            json!({"action": "wait", "id": "slow", "timeoutMs": 600000}),
        ),
        // Run 2: the same serve still knows the child, which is still busy.
        Step::tool_call("thread", json!({"action": "poll", "id": "slow"})),
        Step::text("Still working."),
    ]);
    // The child's request hangs until the child is stopped at shutdown.
    fake.route(
        |r| r.last_user_text().as_deref() == Some("Take your time."),
        Step::hang(60_000),
    );
    let mut w = World::launch(&pi, &fake, &extension_dir());

    let mark = w.parent.seen.len();
    w.parent
        .send(&json!({"id": "p1", "type": "prompt", "message": "Go."}));
    // The wait is running once its first progress update arrives; then abort the run.
    w.parent
        .wait_for("a wait progress update", RUN_TIMEOUT, |v| {
            v["type"] == "tool_execution_update"
                && v["args"]["action"] == "wait"
                && v["partialResult"]["details"]["kind"] == "waiting"
        });
    w.parent.send(&json!({"id": "a1", "type": "abort"}));
    let settled = w.parent.wait_for("agent_settled", RUN_TIMEOUT, |v| {
        v["type"] == "agent_settled"
    });
    let dump = w.parent.dump();
    assert_eq!(settled["aborted"], true, "{dump}");
    let events = w.parent.seen[mark..].to_vec();
    let ends = tool_ends(&events, "thread");
    assert_eq!(ends.len(), 4, "{dump}");
    let error_text = |end: &Value| fake_llm::content_text(&end["result"]["content"]);
    assert_eq!(ends[0]["isError"], true, "{dump}");
    assert!(
        error_text(ends[0]).contains("Unknown thread reference: \"nope\""),
        "{}",
        ends[0]
    );
    assert!(error_text(ends[0]).contains("Repair:"), "{}", ends[0]);
    assert_eq!(ends[1]["isError"], true, "{dump}");
    assert!(error_text(ends[1]).contains("prompt"), "{}", ends[1]);
    assert_eq!(ends[2]["isError"], false, "{dump}");
    assert_eq!(ends[3]["isError"], true, "{dump}");
    assert_eq!(error_text(ends[3]), "Thread wait aborted", "{}", ends[3]);

    // The abort stopped nothing: the child is live, and the serve still serves.
    let row = w.thread_row("/root/slow");
    assert_eq!(row["status"], "live", "{row}");
    let events = w.run("p2", "How is it going?");
    let ends = tool_ends(&events, "thread");
    assert_eq!(ends.len(), 1, "{}", w.parent.dump());
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    let snapshot = &ends[0]["result"]["details"]["snapshot"];
    assert_eq!(snapshot["status"], "live", "{snapshot}");
    // (Its phase is the runtime's business: busy on the hanging request, or still starting
    // under heavy load. The child's request may not even have reached the fake yet.)
    assert_eq!(fake.remaining(), 0);
    let old_serves = w.serves();
    assert_eq!(old_serves.len(), 1, "{old_serves:?}");

    // A session switch: the old extension instance's session_shutdown closes its serve, which
    // stops the child; the new instance starts a serve for the new session on its first call.
    fake.push(Step::tool_call("thread", json!({"action": "list"})));
    fake.push(Step::text("Listed."));
    w.parent.send(&json!({"id": "n1", "type": "new_session"}));
    let response = w
        .parent
        .wait_for("the new_session response", RUN_TIMEOUT, |v| {
            v["type"] == "response" && v["id"] == "n1"
        });
    assert_eq!(response["success"], true, "{}", w.parent.dump());
    let deadline = Instant::now() + CLEANUP_TIMEOUT;
    while !w.serves().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(w.serves(), vec![], "the old serve exited after the switch");
    let row = w.thread_row("/root/slow");
    assert_eq!(
        row["status"], "closed",
        "the old serve stopped its child: {row}"
    );
    let events = w.run("p3", "List the threads.");
    let ends = tool_ends(&events, "thread");
    assert_eq!(ends.len(), 1, "{}", w.parent.dump());
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    assert_eq!(
        ends[0]["result"]["details"]["kind"], "listed",
        "{}",
        ends[0]
    );
    let new_serves = w.serves();
    assert_eq!(new_serves.len(), 1, "{new_serves:?}");
    assert_ne!(
        new_serves[0].1, old_serves[0].1,
        "the new serve manages the new session"
    );

    w.shutdown(2);
    eprintln!(
        "real_pi_extension (abort): passed in {:?}",
        started.elapsed()
    );
}

/// The serve's argv as the extension builds it (the database in its environment, never
/// `--db`: issue 46), and a serve that dies: the pending call fails with the exit status and
/// the serve's stderr tail.
#[test]
fn real_pi_extension_passes_the_session_to_serve_and_reports_a_dead_serve() {
    let Some((pi, _serial)) =
        parent_pi_or_skip("real_pi_extension_passes_the_session_to_serve_and_reports_a_dead_serve")
    else {
        return;
    };
    let fake = FakeLlm::with_script([
        Step::tool_call("thread", json!({"action": "list"})),
        Step::text("It failed."),
    ]);
    // A stand-in for threadbase that prints its argv (one per line) to stderr and exits 3.
    let bin_dir = tempfile::tempdir().unwrap();
    let fake_bin = bin_dir.path().join("threadbase-dies");
    std::fs::write(
        &fake_bin,
        "#!/bin/sh\necho 'fake serve argv:' >&2\nfor a in \"$@\"; do echo \"[$a]\" >&2; done\necho \"db=$THREADBASE_DB\" >&2\nexit 3\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake_bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut w = World::launch_with(
        &pi,
        &fake,
        &extension_dir().join("index.ts"),
        &[
            ("THREADBASE_BIN", fake_bin.display().to_string()),
            ("THREADBASE_TRUSTED", "1".to_string()),
        ],
    );
    let events = w.run("p1", "List the threads.");
    let ends = tool_ends(&events, "thread");
    assert_eq!(ends.len(), 1, "{}", w.parent.dump());
    assert_eq!(ends[0]["isError"], true, "{}", ends[0]);
    let text = fake_llm::content_text(&ends[0]["result"]["content"]);
    assert!(
        text.starts_with("threadbase serve exited (exit code 3) before answering."),
        "{text}"
    );
    let argv: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix('[').and_then(|l| l.strip_suffix(']')))
        .collect();
    let value = |flag: &str| {
        let i = argv
            .iter()
            .position(|a| *a == flag)
            .unwrap_or_else(|| panic!("no {flag} in {argv:?}"));
        argv[i + 1]
    };
    assert!(!argv.contains(&"--db"), "{argv:?}");
    let db = text.lines().find_map(|l| l.strip_prefix("db="));
    assert_eq!(db, w.db.to_str(), "{text}");
    assert_eq!(argv[0], "serve", "{argv:?}");
    assert_eq!(
        value("--session-file"),
        w.parent_session.to_str().unwrap(),
        "{argv:?}"
    );
    let header = std::fs::read_to_string(&w.parent_session).unwrap();
    let header: Value = serde_json::from_str(header.lines().next().unwrap()).unwrap();
    assert_eq!(value("--session-id"), header["id"].as_str().unwrap());
    assert_eq!(
        std::fs::canonicalize(value("--cwd")).unwrap(),
        std::fs::canonicalize(&w.env.cwd).unwrap()
    );
    let parent_args: Vec<String> = serde_json::from_str(value("--parent-args")).unwrap();
    let expected: Vec<String> = w.env.argv(&pi, &[])[pi.len()..].to_vec();
    assert_eq!(
        parent_args[..expected.len()],
        expected[..],
        "the parent's argv after node and the script"
    );
    assert!(parent_args.iter().any(|a| a == "-e"), "{parent_args:?}");
    assert!(argv.contains(&"--trusted"), "{argv:?}");
    w.shutdown(1);
}

/// Loads the extension with Pi 1.6's own loader (`discoverAndLoadExtensions`), then calls the
/// registered `thread` tool's `execute` as Pi does, with abort signals in each state, and
/// prints the outcomes as one JSON line. Pi itself never runs a tool whose signal already
/// fired (it records `Operation aborted` instead), so this is the way to reach that branch.
const ABORT_HARNESS: &str = r#"
import { pathToFileURL } from "node:url";
const E = process.env;
const pi = await import(pathToFileURL(`${E.HARNESS_PI_DIST}/index.js`).href);
const loaded = await pi.discoverAndLoadExtensions([E.HARNESS_EXTENSION], E.HARNESS_CWD, E.PI_CODING_AGENT_DIR);
if (loaded.errors.length > 0) throw new Error(JSON.stringify(loaded.errors));
const ext = loaded.extensions[0];
const tool = ext.tools.get("thread").definition;
const ctx = {
	cwd: E.HARNESS_CWD,
	sessionManager: { getSessionFile: () => E.HARNESS_SESSION_FILE, getSessionId: () => "ses_harness" },
};
const outcome = (p) =>
	p.then((r) => ({ kind: r.details?.kind ?? null }), (e) => ({ error: e.message }));
const out = {};

// Signals that fired before the call ran: any action, valid or not.
const fired = new AbortController();
fired.abort();
out.before = [];
for (const params of [
	{ action: "list" },
	{ action: "wait", id: "slow", timeoutMs: 1000 },
	{ action: "send", id: "missing" },
	{ action: "start", prompt: "Never." },
	{ nonsense: true },
]) {
	out.before.push(await outcome(tool.execute("c0", params, fired.signal, undefined, ctx)));
}

out.start = await outcome(
	tool.execute("c1", { action: "start", prompt: "Take your time.", taskName: "slow" }, new AbortController().signal, undefined, ctx),
);
// Aborted while they run: a list and a poll run to their results.
for (const [name, params] of [["list", { action: "list" }], ["poll", { action: "poll", id: "slow" }]]) {
	const c = new AbortController();
	const p = tool.execute("c2", params, c.signal, undefined, ctx);
	c.abort();
	out[name] = await outcome(p);
}
// A wait aborted while it waits (at its first progress update).
{
	const c = new AbortController();
	let updates = 0;
	const onUpdate = () => {
		updates += 1;
		c.abort();
	};
	out.wait = await outcome(tool.execute("c3", { action: "wait", id: "slow", timeoutMs: 60000 }, c.signal, onUpdate, ctx));
	out.waitUpdates = updates;
}
// The abort stopped nothing: the child still runs.
const polled = await tool.execute("c4", { action: "poll", id: "slow" }, undefined, undefined, ctx);
out.after = polled.details.snapshot.status;
for (const handler of ext.handlers.get("session_shutdown") ?? []) await handler({ type: "session_shutdown" }, ctx);
console.log(JSON.stringify(out));
"#;

/// pi-threads' abort texts: `Thread action aborted` for any call whose signal fired before it
/// ran (before its parameters are looked at, and before any serve is started), `Thread wait
/// aborted` for a wait aborted while it waits; other actions aborted while they run return
/// their results. Nothing is stopped by an abort.
#[test]
fn real_pi_extension_abort_texts_are_the_originals() {
    let Some(_pi) = pi_or_skip("real_pi_extension_abort_texts_are_the_originals") else {
        return;
    };
    let tools = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/pi/node_modules");
    let node = tools.join("node/bin/node");
    let pi_dist = tools.join("@earendil-works/pi-coding-agent/dist");
    if !node.is_file() || !pi_dist.join("index.js").is_file() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "Pi is not installed under {}; run .ci/install-pi",
            tools.display()
        );
        eprintln!("SKIPPED real_pi_extension_abort_texts_are_the_originals: no tools/pi");
        return;
    }
    let _serial = serial();
    let fake = FakeLlm::start();
    let env = hermetic_pi_env(&fake);
    let sessions = env.root.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let parent_session = sessions.join("parent.jsonl");
    std::fs::write(
        &parent_session,
        format!("{}\n", json!({"type":"session","version":3,"id":"ses_harness","timestamp":"2026-11-30T00:00:00.000Z","cwd":env.cwd})),
    )
    .unwrap();
    // The children are scripted agents whose run takes a minute (stopped at shutdown).
    let script = env.root.path().join("script.json");
    std::fs::write(
        &script,
        json!({"turns": [[{"delay_ms": 60000}]]}).to_string(),
    )
    .unwrap();
    let harness = env.root.path().join("harness.mjs");
    std::fs::write(&harness, ABORT_HARNESS).unwrap();
    let db = env.root.path().join("db.sqlite");
    let out = std::process::Command::new(&node)
        .arg(&harness)
        .env_clear()
        .envs(env.env.iter().map(|(k, v)| (k, v)))
        .env("THREADBASE_BIN", env!("CARGO_BIN_EXE_threadbase"))
        .env("THREADBASE_DB", &db)
        .env(
            "THREADBASE_PI_COMMAND",
            json!([
                env!("CARGO_BIN_EXE_threadbase"),
                "scripted-agent",
                "--script",
                script
            ])
            .to_string(),
        )
        .env("HARNESS_PI_DIST", &pi_dist)
        .env("HARNESS_EXTENSION", extension_dir())
        .env("HARNESS_CWD", &env.cwd)
        .env("HARNESS_SESSION_FILE", &parent_session)
        .current_dir(&env.cwd)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let result: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    let aborted = json!({"error": "Thread action aborted"});
    assert_eq!(
        result["before"],
        json!([aborted, aborted, aborted, aborted, aborted]),
        "{result}"
    );
    assert_eq!(result["start"], json!({"kind": "started"}), "{result}");
    assert_eq!(result["list"], json!({"kind": "listed"}), "{result}");
    assert_eq!(result["poll"], json!({"kind": "polled"}), "{result}");
    assert_eq!(
        result["wait"],
        json!({"error": "Thread wait aborted"}),
        "{result}"
    );
    assert!(result["waitUpdates"].as_u64().unwrap() >= 1, "{result}");
    assert_eq!(result["after"], "live", "{result}");
    let left = env.leftovers_after(CLEANUP_TIMEOUT);
    assert!(left.is_empty(), "{left:?}");
    // The one thread the harness started (nothing was started for the aborted `start`), and
    // the shutdown's serve stopped it (it is gone, so its rows are final).
    let rows = sql(&db, "SELECT path, status FROM threads ORDER BY path");
    assert_eq!(
        rows,
        vec![json!({"path": "/root/slow", "status": "closed"})],
        "{rows:?}"
    );
}
