//! `threadbase stop PATTERN…` and `--match GLOB` from outside any serve: real serve processes
//! with scripted children; the stop is a command row that the owning serve carries out, and a
//! thread whose serve is gone gets the restore pass.

use crate::support::serve_client;

use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};
use serve_client::{Scripted, Serve};

/// Children that stay busy until stopped: a long first turn.
const SCRIPT: &str = r#"{"turns": [{"steps": [{"delay_ms": 60000}, {"text": "late"}]}]}"#;

struct World {
    base: Scripted,
}

fn world() -> World {
    let base = Scripted::new("stop");
    base.script("script", SCRIPT);
    World { base }
}

impl World {
    fn serve(&self, session: &str) -> Serve {
        let args = vec!["--session-id".into(), session.into()];
        self.base.serve("script", args, &[])
    }

    fn cli(&self, args: &[&str]) -> Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(&self.base.db)
            .args(args)
            .output()
            .unwrap()
    }

    fn status(&self, path: &str) -> (String, Option<String>) {
        let out = self.cli(&[
            "sql",
            "--json",
            &format!("SELECT status, exit_kind FROM threads WHERE path = '{path}'"),
        ]);
        let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            rows[0]["status"].as_str().unwrap().to_string(),
            rows[0]["exit_kind"].as_str().map(str::to_string),
        )
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn start(s: &mut Serve, task: &str) {
    let r =
        s.thread(json!({"action": "start", "prompt": format!("work on {task}"), "taskName": task}));
    assert_eq!(r["details"]["kind"], "started", "{r}");
}

#[test]
fn stop_by_glob_stops_only_the_matching_live_threads_through_their_serves() {
    let w = world();
    let mut a = w.serve("ses_a");
    let mut b = w.serve("ses_b");
    for t in ["api_one", "api_two", "docs"] {
        start(&mut a, t);
    }
    start(&mut b, "api_three");

    // --match narrows list, tree and events.
    let o = w.cli(&["list", "--match", "/root/api_*"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for p in ["/root/api_one", "/root/api_two", "/root/api_three"] {
        assert!(text.contains(p), "{text}");
    }
    assert!(!text.contains("/root/docs"), "{text}");
    assert!(text.contains("3 threads (3 live, 0 closed)"), "{text}");
    let o = w.cli(&["tree", "--match", "docs"]);
    let text = stdout(&o);
    assert!(
        text.contains("/root/docs") && !text.contains("api_"),
        "{text}"
    );
    let o = w.cli(&["events", "--match", "/root/api_t*", "--json"]);
    let docs: Value = serde_json::from_slice(&o.stdout).unwrap();
    let paths: Vec<&str> = docs
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/root/api_three", "/root/api_two"], "{docs}");
    assert!(!docs[0]["events"].as_array().unwrap().is_empty(), "{docs}");

    // --manager keeps to one manager; the stop goes through ses_a's serve.
    let o = w.cli(&["stop", "/root/api_*", "--manager", "ses_a"]);
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("stopped  /root/api_one"), "{text}");
    assert!(text.contains("stopped  /root/api_two"), "{text}");
    assert!(text.contains("exit stopped"), "{text}");
    assert!(text.contains("2 of 2 threads closed"), "{text}");
    assert!(!text.contains("api_three"), "{text}");
    assert_eq!(
        w.status("/root/api_one"),
        ("closed".into(), Some("stopped".into()))
    );
    assert_eq!(
        w.status("/root/api_two"),
        ("closed".into(), Some("stopped".into()))
    );
    assert_eq!(w.status("/root/docs").0, "live");
    assert_eq!(w.status("/root/api_three").0, "live");

    // A pattern without a leading slash matches at any depth; --force; --json.
    let o = w.cli(&["stop", "api_*", "--force", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        doc["threads"],
        json!([{
            "id": doc["threads"][0]["id"], "path": "/root/api_three", "managerSession": "ses_b",
            "outcome": "stopped", "exit": "stopped",
        }])
    );

    // Nothing live matches: exit 1 with a plain message. A bad glob: exit 2 with a repair.
    let o = w.cli(&["stop", "/root/api_*"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("No live thread matches /root/api_*."),
        "{}",
        stdout(&o)
    );
    let o = w.cli(&["stop", "/root/[api"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("Invalid path pattern \"/root/[api\"")
            && stderr(&o).contains("Repair:"),
        "{}",
        stderr(&o)
    );

    // A thread whose serve is gone: the restore pass closes it (no serve to carry a command).
    // ses_b's serve ends first: its watcher's own restore pass (each second) would otherwise
    // race the command's and close /root/docs before it looks.
    b.close(Duration::from_secs(10));
    let _ = a.child.kill();
    let _ = a.child.wait();
    let o = w.cli(&["stop", "/root/docs"]);
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("restored /root/docs"), "{text}");
    assert!(
        text.contains("its serve is gone; closed as stale"),
        "{text}"
    );
    assert_eq!(
        w.status("/root/docs"),
        ("closed".into(), Some("stale".into()))
    );

    let mut left = Vec::new();
    for _ in 0..100 {
        left = w.base.leftovers();
        if left.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(left.is_empty(), "{left:?}");
}
