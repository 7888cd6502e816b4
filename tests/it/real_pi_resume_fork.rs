//! Issue 13: with real Pi 1.6 children, a `wait` right after `resume` or `fork` (launches that
//! send no prompt) returns `idle` on its first refresh, sends no LLM request, and a following
//! `send` → `wait` brings back the reply. One test per sequence: stop → resume, fork of a child,
//! fork of the parent session, and resume of a thread a SIGKILLed `serve` left stale. Skips
//! without Pi unless CI=true.

use crate::support::fake_llm;
use crate::support::serve_client;

use std::path::PathBuf;
use std::time::Duration;

use fake_llm::{hermetic_pi_env, pi_or_skip, FakeLlm, PiEnv, Step};
use serde_json::{json, Value};
use serve_client::{Serve, ServeSpec};

/// Far longer than any of these waits may take: a wait that runs into it has hung.
const WAIT_MS: u64 = 60_000;

struct World {
    fake: FakeLlm,
    env: PiEnv,
    db: PathBuf,
    parent_session: PathBuf,
    argv: Vec<String>,
}

impl World {
    /// A hermetic Pi env against `fake`, and a parent session holding one exchange.
    fn new(pi: &[String], fake: FakeLlm) -> World {
        let env = hermetic_pi_env(&fake);
        let argv = env.child_command(pi, &[]);
        let sessions = env.agent_dir.join("sessions").join("parent");
        std::fs::create_dir_all(&sessions).unwrap();
        let parent_session = sessions.join("parent.jsonl");
        let lines = [
            json!({"type":"session","version":3,"id":"ses_i13_parent","timestamp":"2026-11-30T00:00:00.000Z","cwd":env.cwd}),
            json!({"type":"message","id":"a0000001","parentId":null,"timestamp":"2026-11-30T00:00:01.000Z","message":{"role":"user","content":[{"type":"text","text":"Remember the word walnut."}],"timestamp":1}}),
            json!({"type":"message","id":"a0000002","parentId":"a0000001","timestamp":"2026-11-30T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Noted: walnut."}],"api":"openai-completions","provider":"fake","model":"fake-model","usage":{"input":1,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":2,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":2}}),
        ];
        std::fs::write(
            &parent_session,
            lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
        )
        .unwrap();
        World {
            db: env.root.path().join("db.sqlite"),
            fake,
            env,
            parent_session,
            argv,
        }
    }

    fn serve(&self) -> Serve {
        let mut vars = self.env.env.clone();
        vars.push((
            "THREADBASE_PI_COMMAND".into(),
            serde_json::to_string(&self.argv).unwrap(),
        ));
        Serve::start(ServeSpec {
            db: &self.db,
            args: vec![
                "--session-file".into(),
                self.parent_session.display().to_string(),
                "--cwd".into(),
                self.env.cwd.display().to_string(),
            ],
            env: vars,
            cwd: self.env.cwd.clone(),
            clear_env: true,
        })
    }

    fn llm_requests(&self) -> usize {
        self.fake.completion_requests().len()
    }

    /// No process of this env is left once `s` has closed.
    fn close(&self, mut s: Serve) {
        assert!(s.close(Duration::from_secs(30)).success());
        let left = self.env.leftovers_after(Duration::from_secs(5));
        assert!(left.is_empty(), "{left:?}");
    }
}

fn details(r: &Value) -> &Value {
    &r["details"]
}

/// `send` → `wait` on a thread that is idle: the reply comes back.
fn send_and_wait_reply(s: &mut Serve, id: &str, message: &str, reply: &str) {
    let r = s.thread(json!({"action": "send", "id": id, "message": message}));
    assert_eq!(
        (
            details(&r)["mode"].as_str(),
            details(&r)["accepted"].as_bool()
        ),
        (Some("prompt"), Some(true)),
        "{r}"
    );
    let r = s.thread(json!({"action": "wait", "id": id, "timeoutMs": WAIT_MS}));
    assert_eq!(details(&r)["timedOut"], false, "{r}");
    assert_eq!(details(&r)["snapshot"]["phase"], "idle", "{r}");
    assert_eq!(details(&r)["snapshot"]["resultSummary"], reply, "{r}");
}

/// Starts `/root/<task>` with a prompt and waits for its first reply.
fn start_and_settle(s: &mut Serve, task: &str, reply: &str) {
    let r = s.thread(json!({"action": "start", "prompt": "Say something.", "taskName": task}));
    // null: not answered within the launch's 4 s (a loaded machine); it runs all the same.
    assert_ne!(details(&r)["promptAccepted"], false, "{r}");
    let r = s.thread(json!({"action": "wait", "id": task, "timeoutMs": WAIT_MS}));
    assert_eq!(details(&r)["timedOut"], false, "{r}");
    assert_eq!(details(&r)["snapshot"]["resultSummary"], reply, "{r}");
}

#[test]
fn wait_after_stop_and_resume_is_idle_at_once() {
    let Some(pi) = pi_or_skip("wait_after_stop_and_resume_is_idle_at_once") else {
        return;
    };
    let w = World::new(
        &pi,
        FakeLlm::with_script([Step::text("First reply."), Step::text("After resume.")]),
    );
    let mut s = w.serve();
    start_and_settle(&mut s, "worker", "First reply.");
    let r = s.thread(json!({"action": "stop", "id": "worker"}));
    assert_eq!(details(&r)["snapshot"]["exit"]["kind"], "stopped", "{r}");

    let r = s.thread(json!({"action": "resume", "id": "worker"}));
    s.expect_launched_idle(&r, "worker");
    s.wait_idle_at_once("worker", WAIT_MS);
    assert_eq!(w.llm_requests(), 1, "resume and wait send no LLM request");

    send_and_wait_reply(&mut s, "worker", "Go on.", "After resume.");
    assert_eq!(w.llm_requests(), 2);
    // The resumed child carried on the saved conversation.
    let last = w.fake.completion_requests().pop().unwrap();
    assert!(last.body.contains("First reply."), "{}", last.body);
    w.close(s);
}

#[test]
fn wait_after_fork_of_a_child_is_idle_at_once() {
    let Some(pi) = pi_or_skip("wait_after_fork_of_a_child_is_idle_at_once") else {
        return;
    };
    let w = World::new(
        &pi,
        FakeLlm::with_script([Step::text("Original reply."), Step::text("Fork reply.")]),
    );
    let mut s = w.serve();
    start_and_settle(&mut s, "original", "Original reply.");

    let r = s.thread(json!({"action": "fork", "id": "original", "taskName": "branch"}));
    assert_eq!(details(&r)["kind"], "forked", "{r}");
    s.expect_launched_idle(&r, "branch");
    s.wait_idle_at_once("branch", WAIT_MS);
    assert_eq!(w.llm_requests(), 1, "fork and wait send no LLM request");

    send_and_wait_reply(&mut s, "branch", "And now?", "Fork reply.");
    let last = w.fake.completion_requests().pop().unwrap();
    assert!(last.body.contains("Original reply."), "{}", last.body);
    // The source is untouched and still idle.
    s.wait_idle_at_once("original", WAIT_MS);
    w.close(s);
}

#[test]
fn wait_after_fork_of_the_parent_session_is_idle_at_once() {
    let Some(pi) = pi_or_skip("wait_after_fork_of_the_parent_session_is_idle_at_once") else {
        return;
    };
    let w = World::new(
        &pi,
        FakeLlm::with_script([Step::text("The word was walnut.")]),
    );
    let mut s = w.serve();

    let r = s.thread(json!({"action": "fork"}));
    let d = details(&r);
    assert_eq!(d["kind"], "forked", "{r}");
    assert_eq!(d["snapshot"]["path"], "/root/fork_of_current_session");
    s.expect_launched_idle(&r, "fork_of_current_session");
    s.wait_idle_at_once("fork_of_current_session", WAIT_MS);
    assert_eq!(w.llm_requests(), 0, "fork and wait send no LLM request");

    send_and_wait_reply(
        &mut s,
        "fork_of_current_session",
        "Which word?",
        "The word was walnut.",
    );
    // The fork carried the parent's conversation.
    let last = w.fake.completion_requests().pop().unwrap();
    assert!(
        last.body.contains("Remember the word walnut."),
        "{}",
        last.body
    );
    w.close(s);
}

#[test]
fn wait_after_resume_of_a_stale_thread_from_a_new_serve_is_idle_at_once() {
    let Some(pi) =
        pi_or_skip("wait_after_resume_of_a_stale_thread_from_a_new_serve_is_idle_at_once")
    else {
        return;
    };
    let w = World::new(
        &pi,
        FakeLlm::with_script([
            Step::text("Before the crash."),
            Step::text("After the crash."),
        ]),
    );
    let mut first = w.serve();
    start_and_settle(&mut first, "survivor", "Before the crash.");
    first.child.kill().unwrap(); // SIGKILL: no graceful stop of the child
    first.child.wait().unwrap();
    drop(first);

    let mut s = w.serve();
    let r = s.thread(json!({"action": "poll", "id": "survivor"}));
    assert_eq!(
        (
            details(&r)["snapshot"]["status"].as_str(),
            details(&r)["snapshot"]["exit"]["kind"].as_str()
        ),
        (Some("closed"), Some("stale")),
        "{r}"
    );
    let r = s.thread(json!({"action": "resume", "id": "survivor"}));
    s.expect_launched_idle(&r, "survivor");
    s.wait_idle_at_once("survivor", WAIT_MS);
    assert_eq!(w.llm_requests(), 1, "resume and wait send no LLM request");

    send_and_wait_reply(&mut s, "survivor", "Still there?", "After the crash.");
    let last = w.fake.completion_requests().pop().unwrap();
    assert!(last.body.contains("Before the crash."), "{}", last.body);
    w.close(s);
}
