//! Records the bench fixture `benches/data/pi16_events.jsonl`: the stdout event lines of the
//! real Pi 1.6 (`tools/pi/pi`) running four prompts against the scripted fake LLM (tool calls
//! with streamed bash output, long streamed answers, a follow-up queued mid-run, two tool
//! calls in one turn, a provider error). Responses (lines with an `id`) are left out; the
//! temp folder is replaced by `/home/dev/project` so the file does not depend on the run.
//!
//! Does nothing unless `THREADBASE_RECORD_PI_EVENTS` names the output file:
//!
//! ```text
//! THREADBASE_RECORD_PI_EVENTS=$PWD/benches/data/pi16_events.jsonl \
//!     cargo test --test it record_pi_events:: -- --ignored --nocapture
//! ```

use crate::support::fake_llm;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fake_llm::{find_pi, hermetic_pi_env, FakeLlm, Step, ToolCall};
use serde_json::{json, Value};

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

fn words(text: &str) -> Vec<String> {
    // Deltas of one to three words, as providers stream them.
    let mut out = Vec::new();
    let mut cur = String::new();
    for (i, w) in text.split_inclusive(' ').enumerate() {
        cur.push_str(w);
        if i % 3 != 1 {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A fixture recorder, not a check: run it on purpose with `--ignored`.
#[test]
#[ignore = "records benches/data/pi16_events.jsonl; set THREADBASE_RECORD_PI_EVENTS and pass --ignored"]
fn record_pi16_events() {
    let Ok(out_path) = std::env::var("THREADBASE_RECORD_PI_EVENTS") else {
        eprintln!("record_pi16_events: set THREADBASE_RECORD_PI_EVENTS to record");
        return;
    };
    let pi = find_pi().expect("real Pi");
    let summary = "I ran the test suite with cargo. All five groups passed: store, runtime, \
        mapping, ingest and the CLI round trips. The slowest group was the runtime one at about \
        two seconds, mostly spent waiting for child processes to exit after SIGTERM. Nothing \
        needs fixing; I would only consider shortening the stop escalation timers in tests.";
    let explain = "The event ring keeps the newest forty events of every thread. Each batch \
        reserves its sequence numbers with one UPDATE on the thread row, which also returns the \
        last number, so sequence numbers only grow even when older rows are trimmed. Events the \
        trim would delete right away are never inserted, and the trim itself is a primary key \
        range delete, so its cost does not depend on how many events the thread ever had. \
        Readers see a batch once its transaction commits, a few milliseconds after the child \
        wrote the line.";
    let follow = "Yes: the ring size is a constant in store::events, and the trim statement \
        repeats it, so both must change together. A test checks that exactly forty remain.";
    let two_tools = "Both files exist. The migration creates the events table with its primary \
        key on thread and sequence, and the bench data folder holds the recorded lines.";
    let fake = FakeLlm::with_script([
        // Prompt 1: a bash call with streamed output, then a streamed summary.
        Step::bash("for g in store runtime mapping ingest cli; do echo \"test group $g ... ok\"; sleep 0.05; done"),
        Step::text_deltas(words(summary), Duration::from_millis(2)),
        // Prompt 2: a long answer, slow enough for a follow-up to be queued during it.
        Step::text_deltas(words(explain), Duration::from_millis(15)),
        Step::text_deltas(words(follow), Duration::from_millis(2)),
        // Prompt 3: two tool calls in one turn, then the answer.
        Step::ToolCalls(vec![
            ToolCall {
                id: String::new(),
                name: "bash".into(),
                arguments: json!({"command": "ls -la; echo done"}),
            },
            ToolCall {
                id: String::new(),
                name: "bash".into(),
                arguments: json!({"command": "printf 'a\\nb\\nc\\n' | wc -l"}),
            },
        ]),
        Step::text_deltas(words(two_tools), Duration::from_millis(2)),
        // Prompt 4: a provider error.
        Step::error(500, "upstream overloaded"),
    ]);
    let env = hermetic_pi_env(&fake);
    let session = env.root.path().join("sessions").join("rec.jsonl");
    let session_arg = session.to_string_lossy().into_owned();
    let mut child = env
        .command(&pi, &["--session", &session_arg])
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn pi");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines: Vec<String> = Vec::new();
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let wait = |lines: &mut Vec<String>, pred: &dyn Fn(&Value) -> bool| {
        let deadline = Instant::now() + RUN_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).expect("pi line");
            let v: Value = serde_json::from_str(&line).expect("json line");
            let hit = pred(&v);
            lines.push(line);
            if hit {
                return v;
            }
        }
    };
    let settled = |v: &Value| v["type"] == "agent_settled";

    send(json!({"id": "p1", "type": "prompt", "message": "Run the test suite and summarize."}));
    wait(&mut lines, &settled);
    send(json!({"id": "p2", "type": "prompt", "message": "How does the event ring work?"}));
    wait(&mut lines, &|v| {
        v["type"] == "message_update" && v["assistantMessageEvent"]["type"] == "text_delta"
    });
    send(json!({"id": "f1", "type": "follow_up", "message": "Is the ring size configurable?"}));
    wait(&mut lines, &settled);
    send(
        json!({"id": "p3", "type": "prompt", "message": "Check the migration and the bench data."}),
    );
    wait(&mut lines, &settled);
    send(json!({"id": "p4", "type": "prompt", "message": "One more thing."}));
    wait(&mut lines, &settled);
    let _ = child.kill();
    let _ = child.wait();

    let root = env.root.path().to_string_lossy().into_owned();
    let mut out = String::new();
    let mut kept = 0;
    for line in &lines {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["type"] == "response" {
            continue;
        }
        out.push_str(&line.replace(&root, "/home/dev/project"));
        out.push('\n');
        kept += 1;
    }
    std::fs::write(&out_path, out).expect("write fixture");
    eprintln!("recorded {kept} event lines into {out_path}");
}
