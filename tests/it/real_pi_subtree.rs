//! End to end with real Pi 1.6 and `pi-extension/index.ts`: the root session reads and acts
//! on its whole subtree. The parent model starts `/root/watched` (a scripted child); that
//! child's own serve (started here as the child's extension would start it, with the child's
//! session and place) starts `/root/watched/docs_check`. Then the parent model polls the
//! grandchild by a relative path and lists everything below `/root` through the `thread` tool,
//! and `/threads` shows the grandchild under Children of `/root/watched` and stops it: the
//! child's serve carries the stop out. Skips without Pi unless CI=true.

use crate::support::fake_llm;
use crate::support::pi_child;
use crate::support::serve_client;

use std::path::Path;
use std::time::{Duration, Instant};

use fake_llm::{Reaper, Step, MARKER_VAR};
use pi_child::{parent_with_busy_children, pi_with_steps, strings, thread_row, tool_ends};
use serde_json::{json, Value};
use serve_client::{Serve, ServeSpec};

const STEP_TIMEOUT: Duration = Duration::from_secs(120);

fn row(db: &Path, path: &str) -> Value {
    thread_row(db, "id, session_id, status, exit_kind, owner_pid", path)
}

#[test]
fn real_pi_root_reads_and_stops_a_grandchild_held_by_a_childs_serve() {
    let started = Instant::now();
    let test = "real_pi_root_reads_and_stops_a_grandchild_held_by_a_childs_serve";
    let steps = [
        Step::tool_call(
            "thread",
            json!({"action": "start", "prompt": "Watch the logs.", "taskName": "watched"}),
        ),
        Step::text("Started."),
        Step::tool_call(
            "thread",
            json!({"action": "poll", "id": "watched/docs_check"}),
        ),
        Step::tool_call("thread", json!({"action": "list", "ancestor": "/root"})),
        Step::text("Seen."),
    ];
    let Some((pi, _fake, env)) = pi_with_steps(test, steps) else {
        return;
    };
    let _reaper = Reaper(&env);
    // Children and the grandchild: scripted agents that stay busy until stopped.
    let (mut p, db, child_command) = parent_with_busy_children(&pi, &env, 60_000);

    // --- the parent model starts /root/watched ------------------------------------------------
    let events = p.run("p1", "Start a watcher thread.", STEP_TIMEOUT);
    let end = tool_ends(&events, "thread")[0];
    assert_eq!(end["isError"], false, "{end}");

    // --- the child's own serve starts the grandchild -------------------------------------------
    let watched = row(&db, "/root/watched");
    let mut child_serve = Serve::start(ServeSpec {
        db: &db,
        args: vec![
            "--session-id".into(),
            watched["session_id"].as_str().unwrap().to_string(),
            "--cwd".into(),
            env.cwd.display().to_string(),
        ],
        env: vec![
            ("THREADBASE_PI_COMMAND".into(), child_command),
            (MARKER_VAR.into(), env.marker.clone()),
            (
                "PI_CODING_AGENT_DIR".into(),
                env.agent_dir.display().to_string(),
            ),
            ("PI_THREADS_PATH".into(), "/root/watched".into()),
            (
                "PI_THREADS_SELF_ID".into(),
                watched["id"].as_str().unwrap().into(),
            ),
            ("PI_THREADS_DEPTH".into(), "1".into()),
        ],
        cwd: env.cwd.clone(),
        clear_env: false,
    });
    let r = child_serve
        .thread(json!({"action": "start", "prompt": "Check the docs.", "taskName": "docs_check"}));
    let docs_id = r["details"]["snapshot"]["id"].as_str().unwrap().to_string();

    // --- the parent model reads it through the thread tool -----------------------------------
    let events = p.run("p2", "How is the docs check?", STEP_TIMEOUT);
    let ends = tool_ends(&events, "thread");
    assert_eq!(ends.len(), 2, "{}", p.dump());
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    let polled = &ends[0]["result"]["details"]["snapshot"];
    assert_eq!(polled["id"], docs_id.as_str(), "{}", ends[0]);
    assert_eq!(polled["path"], "/root/watched/docs_check");
    let listed: Vec<&str> = ends[1]["result"]["details"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        ["/root/watched", "/root/watched/docs_check"],
        "{}",
        ends[1]
    );

    // --- /threads: Children of /root/watched shows the grandchild, and stops it ---------------
    p.send(&json!({"id": "t1", "type": "prompt", "message": "/threads"}));
    let ui = |p: &mut pi_child::PiChild, method: &str| p.ui_request(method, STEP_TIMEOUT);
    let list = ui(&mut p, "select");
    let top = strings(&list["options"]);
    assert!(top[0].starts_with("/root/watched  "), "{list}");
    assert_eq!(
        top.len(),
        3,
        "only this session's own thread at the top: {top:?}"
    );
    p.answer_ui(&list, json!({"value": top[0]}));
    ui(&mut p, "notify");
    let actions = ui(&mut p, "select");
    p.answer_ui(&actions, json!({"value": "Children"}));
    let below = ui(&mut p, "select");
    assert!(
        below["title"]
            .as_str()
            .unwrap()
            .starts_with("Threads under /root/watched: 1 (1 live, 0 closed)"),
        "{below}"
    );
    let options = strings(&below["options"]);
    assert!(
        options[0].starts_with("/root/watched/docs_check  "),
        "{options:?}"
    );
    p.answer_ui(&below, json!({"value": options[0]}));
    let summary = ui(&mut p, "notify");
    assert!(
        summary["message"]
            .as_str()
            .unwrap()
            .starts_with("Pi thread \"")
            && summary["message"].as_str().unwrap().contains(&format!(
                "\"\nPath: /root/watched/docs_check\nID: {docs_id}\n"
            )),
        "{summary}"
    );
    let actions = ui(&mut p, "select");
    assert_eq!(
        strings(&actions["options"]),
        ["Refresh", "Children", "Stop", "Back"]
    );
    p.answer_ui(&actions, json!({"value": "Stop"}));
    let confirm = ui(&mut p, "confirm");
    p.answer_ui(&confirm, json!({"confirmed": true}));
    let stopped = ui(&mut p, "notify");
    let stopped_text = stopped["message"].as_str().unwrap();
    assert!(
        stopped_text.starts_with("Stopped \"")
            && stopped_text.contains("\".\nPath: /root/watched/docs_check\nStatus: closed/")
            && stopped_text.contains(&format!(
                "\nNote: carried out by the serve that holds it (pid {}).",
                child_serve.child.id()
            )),
        "{stopped}"
    );
    let grandchild = row(&db, "/root/watched/docs_check");
    assert_eq!(grandchild["status"], "closed", "{grandchild}");
    assert_eq!(grandchild["exit_kind"], "stopped", "{grandchild}");
    ui(&mut p, "notify");
    let actions = ui(&mut p, "select");
    p.answer_ui(&actions, json!({"value": "Back"}));
    let below = ui(&mut p, "select");
    p.answer_ui(&below, json!({"value": "✕ Close"}));
    let response = p.response("t1", STEP_TIMEOUT);
    assert_eq!(response["data"]["disposition"], "handled", "{response}");

    // --- shutdown ------------------------------------------------------------------------------
    child_serve.close(Duration::from_secs(20));
    p.finish(Duration::from_secs(10));
    let leftovers = env.leftovers_after(Duration::from_secs(20));
    assert!(leftovers.is_empty(), "left: {leftovers:?}");
    eprintln!("real_pi_subtree: passed in {:?}", started.elapsed());
}
