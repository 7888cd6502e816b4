//! End to end with real Pi 1.6: a parent Pi with `pi-extension/index.ts` starts a real Pi child
//! and ends. A new `pi` (another session) resumes that child by its canonical path: the thread
//! is adopted by the new session and launched again on its own session file. Skips without Pi
//! unless CI=true.

use crate::support::fake_llm;
use crate::support::pi_child;

use std::time::Duration;

use fake_llm::{hermetic_pi_env, Step};
use pi_child::{extension_dir, magic_word_fake, parent_pi_or_skip, sql, tool_ends, PiChild};
use serde_json::json;

const RUN_TIMEOUT: Duration = Duration::from_secs(120);

#[test]
fn a_new_pi_session_resumes_and_adopts_the_thread_of_a_session_that_ended() {
    let test = "a_new_pi_session_resumes_and_adopts_the_thread_of_a_session_that_ended";
    let Some((pi, _serial)) = parent_pi_or_skip(test) else {
        return;
    };
    let fake = magic_word_fake([
        Step::text("Done."),
        Step::tool_call("thread", json!({"action": "resume", "id": "/root/magic"})),
        Step::text("Resumed."),
    ]);
    let env = hermetic_pi_env(&fake);
    let db = env.root.path().join("db.sqlite");
    let extension = extension_dir().join("index.ts");
    let child_command = json!(pi).to_string();
    let vars = [
        (
            "THREADBASE_BIN",
            env!("CARGO_BIN_EXE_threadbase").to_string(),
        ),
        ("THREADBASE_DB", db.display().to_string()),
        ("THREADBASE_PI_COMMAND", child_command.clone()),
    ];

    // The first session starts /root/magic, waits for its answer, and ends.
    let mut first = pi_child::spawn_parent(&pi, &env, &extension, &db, child_command, &[]);
    first.run(
        "p1",
        "Use a background thread to find out the magic word.",
        RUN_TIMEOUT,
    );
    first.finish(Duration::from_secs(10));
    // Its serve stops its child and exits once the parent is gone.
    let left = env.leftovers_after(Duration::from_secs(20));
    assert!(left.is_empty(), "{left:?}");
    let before = sql(
        &db,
        "SELECT t.id, t.status, m.session_id FROM threads t JOIN managers m ON m.id = t.manager_id WHERE t.path = '/root/magic'",
    );
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(before[0]["status"], "closed", "{before:?}");
    let first_session = before[0]["session_id"].as_str().unwrap().to_string();

    // A new `pi`, on a session of its own.
    let second_file = env.root.path().join("sessions").join("second.jsonl");
    let (session_arg, ext_arg) = (
        second_file.display().to_string(),
        extension.display().to_string(),
    );
    let mut second = PiChild::spawn(
        &pi,
        &env,
        &["--session", &session_arg, "-e", &ext_arg],
        &vars,
    );
    let events = second.run("p2", "Resume the magic thread.", RUN_TIMEOUT);
    let dump = second.dump();
    let ends = tool_ends(&events, "thread");
    assert_eq!(ends.len(), 1, "{dump}");
    assert_eq!(ends[0]["isError"], false, "{dump}");
    let result = &ends[0]["result"];
    assert_eq!(result["details"]["kind"], "resumed", "{dump}");
    assert_eq!(result["details"]["thread"]["path"], "/root/magic", "{dump}");
    let text = fake_llm::content_text(&result["content"]);
    assert!(
        text.contains(&format!(
            "Note: adopted from Pi session {first_session}, which has ended (its path there: /root/magic)."
        )),
        "{text}"
    );
    let after = sql(
        &db,
        "SELECT t.id, t.status, m.session_id, m.session_file FROM threads t JOIN managers m ON m.id = t.manager_id WHERE t.path = '/root/magic'",
    );
    assert_eq!(after[0]["id"], before[0]["id"], "{after:?}");
    assert_eq!(after[0]["status"], "live", "{after:?}");
    assert_ne!(
        after[0]["session_id"].as_str(),
        Some(first_session.as_str())
    );
    assert_eq!(
        after[0]["session_file"].as_str().map(std::path::Path::new),
        Some(dunce::canonicalize(&second_file).unwrap().as_path()),
        "{after:?}"
    );
    let adopted = sql(
        &db,
        "SELECT count(*) AS n FROM thread_events WHERE type = 'thread_adopted'",
    );
    assert_eq!(adopted[0]["n"], 1);
    second.finish(Duration::from_secs(10));
    let left = env.leftovers_after(Duration::from_secs(20));
    assert!(left.is_empty(), "{left:?}");
}
