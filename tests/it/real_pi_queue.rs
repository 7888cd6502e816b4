//! The durable queue (`THREADBASE_QUEUE=1`, issue 30) with real Pi 1.6 children against the
//! loopback fake LLM: with `PI_THREADS_MAX_THREADS=1` a serve starts one child and queues three
//! more starts (live, phase `queued`, in order); a queued thread stopped before its launch
//! never starts; serve is killed with SIGKILL while rows are queued, and the next serve of the
//! session launches them one by one as the threads before them close, each running its prompt.
//! Skips without Pi unless CI=true.

use crate::support::fake_llm;
use crate::support::serve_client;

use std::path::Path;
use std::time::Duration;

use fake_llm::{hermetic_pi_env, pi_or_skip, FakeLlm, Step};
use serde_json::{json, Value};
use serve_client::{serve_with_pi_children, Serve};

fn serve(db: &Path, env: &fake_llm::PiEnv, argv: &[String]) -> Serve {
    let mut vars = env.env.clone();
    vars.push(("THREADBASE_QUEUE".into(), "1".into()));
    vars.push(("PI_THREADS_MAX_THREADS".into(), "1".into()));
    // Idle threads keep their slots: a slot frees when a thread closes.
    vars.push(("THREADBASE_QUEUE_IDLE_MS".into(), "600000".into()));
    serve_with_pi_children(db, &vars, &env.cwd, argv, "thread", "ses_queue_root")
}

fn start(s: &mut Serve, task: &str) -> Value {
    let r =
        s.thread(json!({"action": "start", "prompt": format!("TASK-{task}"), "taskName": task}));
    r["details"]["snapshot"].clone()
}

fn wait(s: &mut Serve, path: &str) -> Value {
    let r = s.thread(json!({"action": "wait", "id": path, "timeoutMs": 60000}));
    assert_eq!(r["details"]["timedOut"], false, "{r}");
    r["details"]["snapshot"].clone()
}

fn launch_seq(db: &Path, path: &str) -> i64 {
    let rows = crate::support::pi_child::sql(
        db,
        &format!("SELECT launch_seq FROM threads WHERE path = '{path}'"),
    );
    rows[0]["launch_seq"].as_i64().unwrap()
}

#[test]
fn real_pi_queue_launches_queued_threads_in_order_and_survives_a_sigkill_of_serve() {
    let test = "real_pi_queue_launches_queued_threads_in_order_and_survives_a_sigkill_of_serve";
    let Some(pi) = pi_or_skip(test) else {
        return;
    };
    let _one = crate::support::pi_child::one_parent_at_a_time();
    let fake = FakeLlm::start();
    for task in ["a", "b", "c", "d"] {
        let prompt = format!("TASK-{task}");
        fake.route(
            move |r| r.last_user_text().as_deref() == Some(prompt.as_str()),
            Step::text(format!("{task} is done")),
        );
    }
    let env = hermetic_pi_env(&fake);
    let argv = env.child_command(&pi, &[]);
    let db = env.root.path().join("db.sqlite");
    let mut s = serve(&db, &env, &argv);

    let a = start(&mut s, "a");
    assert_ne!(a["phase"], "queued", "{a}");
    for (n, task) in ["b", "c", "d"].into_iter().enumerate() {
        let snap = start(&mut s, task);
        assert_eq!(
            (&snap["status"], &snap["phase"], &snap["queuePosition"]),
            (&json!("live"), &json!("queued"), &json!(n + 1)),
            "{snap}"
        );
    }
    assert_eq!(wait(&mut s, "/root/a")["result"]["text"], "a is done");
    // Stopped while queued: closed, never launched; the others move up.
    let r = s.thread(json!({"action": "stop", "id": "/root/d"}));
    assert_eq!(r["details"]["snapshot"]["exit"]["kind"], "stopped", "{r}");
    let live = s.thread(json!({"action": "list", "state": "live"}));
    let queued: Vec<(String, i64)> = live["details"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["phase"] == "queued")
        .map(|t| {
            (
                t["path"].as_str().unwrap().to_string(),
                t["queuePosition"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        queued,
        [("/root/b".to_string(), 1), ("/root/c".to_string(), 2)],
        "{live}"
    );

    // SIGKILL with two rows queued: they are still rows, not launched.
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    assert_eq!(launch_seq(&db, "/root/b"), 0);
    assert_eq!(launch_seq(&db, "/root/c"), 0);

    // The next serve of the session: the restore pass closes /root/a as stale (and kills its
    // Pi), which frees the slot for /root/b; /root/c follows once /root/b closes.
    let mut s = serve(&db, &env, &argv);
    let b = wait(&mut s, "/root/b");
    assert_eq!(b["result"]["text"], "b is done", "{b}");
    assert_eq!(launch_seq(&db, "/root/c"), 0);
    s.thread(json!({"action": "stop", "id": "/root/b"}));
    let c = wait(&mut s, "/root/c");
    assert_eq!(c["result"]["text"], "c is done", "{c}");
    let order = crate::support::pi_child::sql(
        &db,
        "SELECT path, exit_kind FROM threads ORDER BY CASE WHEN launch_seq > 0 THEN live_started_at END, path",
    );
    assert_eq!(
        order,
        vec![
            json!({"path": "/root/d", "exit_kind": "stopped"}),
            json!({"path": "/root/a", "exit_kind": "stale"}),
            json!({"path": "/root/b", "exit_kind": "stopped"}),
            json!({"path": "/root/c", "exit_kind": null}),
        ],
    );
    assert_eq!(launch_seq(&db, "/root/d"), 0);
    // Every prompt was asked of the model once, and /root/d's never.
    assert_eq!(fake.routes_remaining(), 1);
    s.close(Duration::from_secs(20));
    let left = env.leftovers_after(Duration::from_secs(20));
    assert!(left.is_empty(), "{left:?}");
}
