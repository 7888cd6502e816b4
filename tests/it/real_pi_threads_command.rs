//! End to end: the `/threads` command of `pi-extension/index.ts` in real Pi 1.6 (RPC mode).
//! The scripted parent model starts a thread (a `threadbase scripted-agent` child that stays
//! busy); then the test sends the RPC command `{"type": "prompt", "message": "/threads"}`, which
//! Pi runs as the extension command (its `prompt` response, `disposition: "handled"`, comes after
//! the handler returns), and answers the command's dialogs (`extension_ui_request`) with
//! `extension_ui_response`: pick the thread, Refresh, Children, Up, pick it again, Stop, confirm,
//! Back, Close. The thread must end up closed with a `stopped` exit. Skips without Pi unless
//! CI=true.

use crate::support::fake_llm;
use crate::support::pi_child;

use std::path::Path;
use std::time::{Duration, Instant};

use fake_llm::{Reaper, Step};
use pi_child::{parent_with_busy_children, pi_with_steps, strings, tool_ends, PiChild};
use serde_json::{json, Value};

/// Any one wait for a record of the parent (Pi startup, a turn, a dialog).
const STEP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the parent may take to exit after stdin EOF.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the serve and any child may take to go away after the parent exited.
const CLEANUP_TIMEOUT: Duration = Duration::from_secs(20);

/// The parent Pi (dropping it SIGKILLs its group), with the dialog helpers of this test.
struct Parent(PiChild);

impl std::ops::Deref for Parent {
    type Target = PiChild;
    fn deref(&self) -> &PiChild {
        &self.0
    }
}

impl std::ops::DerefMut for Parent {
    fn deref_mut(&mut self) -> &mut PiChild {
        &mut self.0
    }
}

impl Parent {
    fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.0.wait_for(what, STEP_TIMEOUT, pred)
    }

    /// The next dialog or notification of the given method.
    fn ui_request(&mut self, method: &str) -> Value {
        self.0.ui_request(method, STEP_TIMEOUT)
    }

    fn answer(&mut self, request: &Value, answer: Value) {
        self.0.answer_ui(request, answer);
    }
}

fn thread_row(db: &Path, path: &str) -> Value {
    pi_child::thread_row(db, "id, path, status, phase, exit_kind", path)
}

#[test]
fn threads_command_lists_polls_and_stops_a_thread_through_pi_dialogs() {
    let started = Instant::now();
    let test = "threads_command_lists_polls_and_stops_a_thread_through_pi_dialogs";
    let start = json!({"action": "start", "prompt": "Watch the logs.", "taskName": "watched", "name": "Watcher"});
    let steps = [Step::tool_call("thread", start), Step::text("Started.")];
    let Some((pi, fake, env)) = pi_with_steps(test, steps) else {
        return;
    };
    let _reaper = Reaper(&env);
    // The child: a scripted agent whose turn stays busy for 30 s (the stop ends it).
    let (parent, db, _) = parent_with_busy_children(&pi, &env, 30_000);
    let mut p = Parent(parent);

    // --- the parent model starts the thread -------------------------------------------------
    let events = p.run("p1", "Start a watcher thread.", STEP_TIMEOUT);
    let end = tool_ends(&events, "thread")[0];
    assert_eq!(end["isError"], false, "{end}\n{}", p.dump());
    assert_eq!(
        end["result"]["details"]["snapshot"]["path"],
        "/root/watched"
    );
    assert_eq!(thread_row(&db, "/root/watched")["status"], "live");

    // --- the command is registered ------------------------------------------------------------
    p.send(&json!({"id": "c1", "type": "get_commands"}));
    let commands = p.wait_for("the get_commands response", |v| {
        v["type"] == "response" && v["id"] == "c1"
    });
    let threads_cmd = commands["data"]["commands"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "threads"))
        .unwrap_or_else(|| panic!("no /threads command: {commands}"))
        .clone();
    assert_eq!(threads_cmd["source"], "extension", "{threads_cmd}");

    // --- /threads: the list ------------------------------------------------------------------
    // In RPC mode a `prompt` starting with `/` runs a registered extension command (no LLM
    // request); the response comes when the handler returns.
    let requests_before = fake.completion_requests().len();
    p.send(&json!({"id": "t1", "type": "prompt", "message": "/threads"}));
    let list = p.ui_request("select");
    let title = list["title"].as_str().unwrap().to_string();
    assert!(title.starts_with("Threads of this session: 1 "), "{list}");
    let options = strings(&list["options"]);
    assert_eq!(options.len(), 3, "one thread, Refresh, Close: {options:?}");
    let watched = options[0].clone();
    let (path, rest) = watched.split_once("  ").expect("path  state  name");
    assert_eq!(path, "/root/watched", "{watched:?}");
    let (state, name) = rest.split_once("  ").expect("state  name");
    assert!(
        ["live/starting", "live/busy", "live/idle"].contains(&state),
        "a live state, spelled as everywhere else: {watched:?}"
    );
    assert_eq!(name, "Watcher", "{watched:?}");
    assert_eq!(options[1..], ["⟳ Refresh", "✕ Close"], "{options:?}");
    assert!(
        !options
            .iter()
            .any(|o| o.to_lowercase().contains("start") || o.to_lowercase().contains("send")),
        "no start/send entries: {options:?}"
    );
    p.answer(&list, json!({"value": watched}));

    // --- the thread's poll summary and its actions ------------------------------------------
    let summary = p.ui_request("notify");
    let summary_text = summary["message"].as_str().unwrap().to_string();
    assert!(
        summary_text.starts_with("Pi thread \"")
            && summary_text.contains("\nPath: /root/watched\nID: thread_")
            && summary_text.contains("\nStatus: live/"),
        "the poll summary: {summary}"
    );
    let actions = p.ui_request("select");
    // The summary is shown once (the notification); the dialog's title names the state only.
    let title = actions["title"].as_str().unwrap();
    assert!(
        title.starts_with("/root/watched is live/")
            && title.ends_with(": choose an action")
            && !title.contains("Path:"),
        "{actions}"
    );
    assert_eq!(
        strings(&actions["options"]),
        ["Refresh", "Children", "Stop", "Back"],
        "{actions}"
    );
    // Refresh polls again.
    p.answer(&actions, json!({"value": "Refresh"}));
    let again = p.ui_request("notify");
    assert!(
        again["message"]
            .as_str()
            .unwrap()
            .starts_with("Pi thread \"Watcher\"\nPath: /root/watched\nID: thread_"),
        "{again}"
    );
    let actions = p.ui_request("select");
    // Children: the (empty) level below the thread, with Up back to the top level.
    p.answer(&actions, json!({"value": "Children"}));
    let below = p.ui_request("select");
    assert!(
        below["title"]
            .as_str()
            .unwrap()
            .starts_with("Threads under /root/watched: 0 "),
        "{below}"
    );
    assert_eq!(
        strings(&below["options"]),
        ["⟳ Refresh", "↑ Up", "✕ Close"],
        "{below}"
    );
    p.answer(&below, json!({"value": "↑ Up"}));
    let list = p.ui_request("select");
    let watched = strings(&list["options"])[0].clone();
    assert!(watched.starts_with("/root/watched  "), "{list}");
    p.answer(&list, json!({"value": watched}));
    p.ui_request("notify");
    let actions = p.ui_request("select");
    p.answer(&actions, json!({"value": "Stop"}));

    // --- Stop asks first ----------------------------------------------------------------------
    let confirm = p.ui_request("confirm");
    assert_eq!(confirm["title"], "Stop /root/watched?", "{confirm}");
    p.answer(&confirm, json!({"confirmed": true}));
    let stopped = p.ui_request("notify");
    assert!(
        stopped["message"]
            .as_str()
            .unwrap()
            .starts_with("Stopped \"")
            && stopped["message"]
                .as_str()
                .unwrap()
                .ends_with("\nPath: /root/watched\nStatus: closed/stopped"),
        "{stopped}"
    );
    let row = thread_row(&db, "/root/watched");
    assert_eq!(row["status"], "closed", "{row}");
    assert_eq!(row["exit_kind"], "stopped", "{row}");

    // The view polls again: closed, no Stop any more. Back to the list, then Close.
    let after = p.ui_request("notify");
    assert!(
        after["message"]
            .as_str()
            .unwrap()
            .contains("\nStatus: closed/stopped\n"),
        "{after}"
    );
    let actions = p.ui_request("select");
    assert_eq!(
        strings(&actions["options"]),
        ["Refresh", "Children", "Back"],
        "{actions}"
    );
    p.answer(&actions, json!({"value": "Back"}));
    let list = p.ui_request("select");
    let options = strings(&list["options"]);
    assert_eq!(
        options[0], "/root/watched  closed/stopped  Watcher",
        "the list shows the closed thread as closed/stopped now (not its last phase): {options:?}"
    );
    p.answer(&list, json!({"value": "✕ Close"}));
    let response = p.wait_for("the /threads prompt response", |v| {
        v["type"] == "response" && v["id"] == "t1"
    });
    assert_eq!(response["success"], true, "{response}");
    assert_eq!(response["data"]["disposition"], "handled", "{response}");
    assert_eq!(
        fake.completion_requests().len(),
        requests_before,
        "the command made no LLM request"
    );
    let errors: Vec<&Value> = p
        .seen
        .iter()
        .filter(|v| v["type"] == "extension_error")
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");

    // --- shutdown: nothing carrying the marker survives ---------------------------------------
    p.finish(EXIT_TIMEOUT);
    let leftovers = env.leftovers_after(CLEANUP_TIMEOUT);
    assert!(
        leftovers.is_empty(),
        "processes left after the parent exited: {leftovers:?}"
    );
    eprintln!("real_pi_threads_command: passed in {:?}", started.elapsed());
}
