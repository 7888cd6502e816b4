//! `agent_steer`: resuming a thread (after a crash, a dead serve, where its settled process
//! still lives, after another serve retires it), its timer, and a stopping thread.

use super::{
    call, check_clean, fail, notices, spawn_detached, talker, wait_for, world, ROOT_SESSION,
};
use crate::support::serve_client::session_user_texts as user_texts;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[test]
fn crash_restore_pauses_and_mailboxes_deliver_exactly_once() {
    let w = world();
    let mut root = w.root("slow", &[]);
    let v = spawn_detached(&mut root, "a", "long job");
    let file = PathBuf::from(v["sessionFile"].as_str().unwrap());
    spawn_detached(&mut root, "/k", "independent");
    // A notice waiting for the root: written, not yet claimed by any serve.
    wait_for("running", Duration::from_secs(5), || {
        w.sql("SELECT count(*) FROM threads WHERE agent_state = 'running'")[0][0] == 2
    });
    // SIGKILL the owning serve mid-run.
    root.child.kill().unwrap();
    root.child.wait().unwrap();
    // Rows written by a process that died before delivering them: a steer never sent, one the
    // child already consumed (its task is in the transcript), and a notice for /root.
    let now = threadbase::time::now_iso();
    let conn = crate::support::sql::Conn::open(&w.base.db).unwrap();
    let id: String = conn
        .query_row("SELECT id FROM threads WHERE path = '/root/a'", (), |r| {
            r.get(0)
        })
        .unwrap();
    conn.execute(
        "INSERT INTO mailbox (thread_id, direction, kind, send_key, body, created_at) VALUES (?1, 'to_child', 'steer', 'lost-1', 'pending steer', ?2)",
        (&id, &now),
    )
    .unwrap();
    conn.execute(
        "INSERT INTO mailbox (thread_id, direction, kind, send_key, body, created_at) VALUES (?1, 'to_child', 'steer', 'lost-2', 'long job', '2000-01-01T00:00:00.000Z')",
        [&id],
    )
    .unwrap();
    conn.execute(
        "INSERT INTO mailbox (thread_id, direction, kind, send_key, body, recipient_path, created_at) VALUES (?1, 'to_parent', 'progress', 'lost-3', 'Progress from /root/a: saved', '/root', ?2)",
        (&id, &now),
    )
    .unwrap();
    drop(conn);
    wait_for("children gone", Duration::from_secs(10), || {
        w.base.leftovers().is_empty()
    });

    // The next serve restores: working threads come back paused, nothing restarts.
    let mut root = w.root("quick", &[]);
    let st = call(&mut root, "agent_status", json!({}));
    for t in st.as_array().unwrap() {
        assert_eq!(t["state"], "paused", "{t}");
        assert_eq!(t["status"], "Interrupted by reload; send input to resume");
        assert!(t.get("output").is_none());
    }
    assert!(w.base.leftovers().iter().all(|p| *p == root.child.id()));
    check_clean(&w.base.db);
    // The saved notice is delivered once.
    wait_for("saved notice", Duration::from_secs(5), || {
        notices(&root)
            .iter()
            .any(|n| n["text"] == "Progress from /root/a: saved")
    });
    // Resume: the unsent steer runs first, the consumed one is not repeated, the new one follows.
    call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a", "message": "resume please"}),
    );
    let v = call(&mut root, "agent_wait", json!({"path": "/root/a"}));
    assert_eq!(v["state"], "completed", "{v}");
    let texts = user_texts(&file);
    for m in ["long job", "pending steer", "resume please"] {
        assert_eq!(
            texts.iter().filter(|t| *t == m).count(),
            1,
            "{m}: {texts:?}"
        );
    }
    wait_for("every mailbox row consumed", Duration::from_secs(5), || {
        w.sql("SELECT count(*) FROM mailbox WHERE state = 'pending'")[0][0] == 0
    });
    drop(root);
    // A later serve of the same session delivers nothing again.
    let root = w.root("quick", &[]);
    std::thread::sleep(Duration::from_millis(400));
    assert!(notices(&root)
        .iter()
        .all(|n| n["text"] != "Progress from /root/a: saved"));
    drop(root);

    // Closing a serve stops its working threads: they read stopped, not interrupted.
    let mut root = w.root("slow", &[]);
    call(
        &mut root,
        "agent_steer",
        json!({"path": "/k", "message": "work again"}),
    );
    assert!(root.close(Duration::from_secs(30)).success());
    assert_eq!(
        w.sql("SELECT agent_state, status_text, status FROM threads WHERE path = '/k'")[0],
        vec![
            json!("stopped"),
            json!("Stopped; session retained"),
            json!("closed")
        ]
    );

    // A forked main session (another session id) gets a fresh registry.
    let mut fork = w.serve("quick", vec!["--session-id".into(), "ses_fork".into()], &[]);
    assert_eq!(call(&mut fork, "agent_status", json!({})), json!([]));
}

#[test]
fn a_grandchild_whose_serve_died_is_resumed_by_the_root() {
    let w = world();
    let mut root = w.root("slow", &[]);
    spawn_detached(&mut root, "a", "lead");
    let mut a = w.child("/root/a", "slow");
    spawn_detached(&mut a, "b", "dig");
    // /root/a's serve dies without a trace while /root/a/b works; b's row still claims a live
    // process.
    assert_eq!(
        call(&mut root, "agent_status", json!({"path": "/root/a/b"}))["state"],
        "running"
    );
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    // A wait does not hang on a thread nobody runs any more: it comes back paused.
    let v = call(&mut root, "agent_wait", json!({"path": "/root/a/b"}));
    assert_eq!(v["state"], "paused", "{v}");
    assert_eq!(v["status"], "Interrupted by reload; send input to resume");
    let v = call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a/b", "message": "carry on"}),
    );
    assert!(
        matches!(
            v["state"].as_str(),
            Some("starting" | "running" | "completed")
        ),
        "{v}"
    );
    let v = call(&mut root, "agent_wait", json!({"path": "/root/a/b"}));
    assert_eq!(v["state"], "completed", "{v}");
    assert_eq!(v["output"], "slow answer to carry on");
    let texts = user_texts(Path::new(v["sessionFile"].as_str().unwrap()));
    assert_eq!(
        texts.iter().filter(|t| *t == "carry on").count(),
        1,
        "{texts:?}"
    );
    call(&mut root, "agent_stop", json!({"path": "/root/a"}));
    drop(root);
    w.finish(15);
}

#[test]
fn a_resume_runs_where_the_settled_process_still_lives() {
    let w = world();
    w.base.script(
        "glacial",
        &json!({"turns": [{"steps": [{"delay_ms": 60000}, {"text": "late"}]}]}).to_string(),
    );
    // /root/a works long enough (2.5 s) for its serve to spawn below it: with "quick"
    // (0.1 s) it could be completed first on a loaded machine, and spawning is refused then.
    let mut root = w.root("slow", &[]);
    spawn_detached(&mut root, "a", "lead");
    // /root/a's serve holds /root/a/b; /root/a/b's serve holds /root/a/b/c, which keeps working.
    let mut a = w.child("/root/a", "slow");
    spawn_detached(&mut a, "b", "dig");
    let mut b_serve = w.serve(
        "glacial",
        vec![
            "--session-id".into(),
            "ses_child_b".into(),
            "--scope-path".into(),
            "/root/a/b".into(),
        ],
        &[
            ("PI_THREADS_ROOT_SESSION_ID", ROOT_SESSION),
            ("PI_SUBAGENTS_MAX_LEVELS", "4"),
        ],
    );
    spawn_detached(&mut b_serve, "c", "deeper");
    let b = call(
        &mut root,
        "agent_wait",
        json!({"path": "/root/a/b", "timeoutMs": 30000}),
    );
    assert_eq!(b["state"], "completed", "{b}");
    let before = &w.sql("SELECT status, launch_seq, pid FROM threads WHERE path = '/root/a/b'")[0];
    assert_eq!(before[0], "live", "b's process hosts working /root/a/b/c");

    // The root resumes b: the serve holding b's process runs it, in that same process.
    let v = call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a/b", "message": "one more thing"}),
    );
    assert!(
        v["state"] == "starting" || v["state"] == "running" || v["state"] == "completed",
        "{v}"
    );
    let b = call(
        &mut root,
        "agent_wait",
        json!({"path": "/root/a/b", "timeoutMs": 30000}),
    );
    assert_eq!(b["state"], "completed", "{b}");
    assert_ne!(b["output"], "slow answer to dig", "a new run answered: {b}");
    let after = &w.sql("SELECT status, launch_seq, pid FROM threads WHERE path = '/root/a/b'")[0];
    assert_eq!(after, before, "the same process ran the resume");
    let owner: Vec<Value> =
        w.sql("SELECT owner_pid FROM threads WHERE path = '/root/a/b'")[0].clone();
    assert_eq!(
        owner[0],
        json!(a.child.id()),
        "still held by /root/a's serve"
    );

    call(&mut root, "agent_stop", json!({"path": "/root/a"}));
    for s in [&mut b_serve, &mut a, &mut root] {
        assert!(s.close(Duration::from_secs(30)).success());
    }
    w.finish(10);
}

#[test]
fn a_resume_waits_for_another_serve_to_retire_the_previous_process() {
    let w = world();
    // b ignores SIGTERM, so retiring its idle process takes the full stop escalation (about
    // 1.5 s until SIGKILL): the root's resume certainly arrives while it still lives.
    let stubborn = json!({"ignore_sigterm": true, "turns": [{"steps": [{"delay_ms": 100}, {"text": "answer to {prompt}"}]}]});
    w.base.script("stubborn", &stubborn.to_string());
    // The root's children answer as "quick" does, after 1.5 s instead of 0.1 s: /root/a must
    // still be working when its serve spawns b below it (on a loaded machine 0.1 s was not
    // always enough, and a completed agent may not spawn).
    let unhurried =
        json!({"turns": [{"steps": [{"delay_ms": 1500}, {"text": "answer to {prompt}"}]}]});
    w.base.script("unhurried", &unhurried.to_string());
    let mut root = w.root("unhurried", &[]);
    spawn_detached(&mut root, "a", "lead");
    let mut a = w.child("/root/a", "stubborn");
    let b = call(
        &mut a,
        "agent_spawn",
        json!({"path": "b", "type": "worker", "task": "dig", "wait": true}),
    );
    assert_eq!(b["state"], "completed", "{b}");
    // /root/a's serve is now retiring b's idle process; the root resumes b at once.
    let old = w.sql("SELECT status, pid FROM threads WHERE path = '/root/a/b'")[0].clone();
    assert_eq!(old[0], "live", "the old process is still being retired");
    call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/a/b", "message": "one more thing"}),
    );
    assert!(
        !Path::new(&format!("/proc/{}", old[1])).exists(),
        "the resume started only after the previous process {} was gone",
        old[1]
    );
    let b = call(
        &mut root,
        "agent_wait",
        json!({"path": "/root/a/b", "timeoutMs": 30000}),
    );
    assert_eq!(b["state"], "completed", "{b}");
    assert_eq!(
        b["output"], "answer to one more thing",
        "a fresh process: {b}"
    );
    let now =
        w.sql("SELECT owner_pid, pid, launch_seq FROM threads WHERE path = '/root/a/b'")[0].clone();
    assert_eq!(
        now[0],
        json!(root.child.id()),
        "the root's serve ran the resume"
    );
    assert_ne!(now[1], old[1], "a new process, {old:?} → {now:?}");
    assert_eq!(now[2], 2);
    // Every message once in b's one session file.
    let texts = user_texts(Path::new(b["sessionFile"].as_str().unwrap()));
    assert_eq!(
        texts
            .iter()
            .filter(|t| t.contains("one more thing"))
            .count(),
        1,
        "{texts:?}"
    );
    for s in [&mut a, &mut root] {
        assert!(s.close(Duration::from_secs(30)).success());
    }
    w.finish(10);
}

/// agent_steer with `timeoutMs` alone re-arms the timer from now (replacing the pending one);
/// stop clears it; the 0.19 rules for steer without anything and of a thread that is not
/// working answer with the original's texts.
#[test]
fn steer_rearms_the_timer_and_stop_clears_it() {
    let w = world();
    talker(&w);
    let mut root = w.root("talker", &[("THREADBASE_TEST_TIMEOUT_DIVISOR", "100")]);
    // 300,000 ms / 100: 3 s, longer than the child works (2.5 s).
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "a", "type": "worker", "task": "t", "wait": false, "timeoutMs": 300000}),
    );
    assert_eq!(v["state"], "starting");
    let armed = &w.sql("SELECT agent_timeout_ms FROM threads WHERE path = '/root/a'")[0][0];
    assert_eq!(armed, 300000);
    let v = call(
        &mut root,
        "agent_steer",
        json!({"path": "a", "timeoutMs": 30000}),
    );
    assert_eq!(v["path"], "/root/a");
    assert_eq!(
        w.sql("SELECT agent_timeout_ms FROM threads WHERE path = '/root/a'")[0][0],
        30000
    );
    wait_for("the re-armed timeout", Duration::from_secs(10), || {
        notices(&root).iter().any(|n| n["kind"] == "timeout")
    });
    let t = notices(&root)
        .into_iter()
        .find(|n| n["kind"] == "timeout")
        .unwrap();
    assert_eq!(t["timeoutMs"], 30000);
    // Stop clears a pending timer: no notice for b.
    let v = call(
        &mut root,
        "agent_spawn",
        json!({"path": "b", "type": "worker", "task": "t", "wait": false, "timeoutMs": 30000}),
    );
    assert_eq!(v["state"], "starting");
    let v = call(&mut root, "agent_stop", json!({"path": "b"}));
    assert_eq!(v["state"], "stopped");
    assert_eq!(
        w.sql("SELECT agent_timeout_at FROM threads WHERE path = '/root/b'")[0][0],
        Value::Null
    );
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        !notices(&root)
            .iter()
            .any(|n| n["kind"] == "timeout" && n["path"] == "/root/b"),
        "{:?}",
        notices(&root)
    );
    // The original's texts.
    let (code, m) = fail(&mut root, "agent_steer", json!({"path": "b"}));
    assert_eq!(code, "invalid_params");
    assert!(
        m.starts_with("Provide message, timeoutMs, or both. Repair:"),
        "{m}"
    );
    let (code, m) = fail(
        &mut root,
        "agent_steer",
        json!({"path": "b", "timeoutMs": 30000}),
    );
    assert_eq!(code, "conflict");
    assert!(
        m.starts_with("Only a working agent has a timeout to extend. Repair:"),
        "{m}"
    );
    for bad in [json!(29999), json!(300001), json!(60000.5), json!("60000")] {
        let (code, m) = fail(
            &mut root,
            "agent_spawn",
            json!({"path": "c", "type": "worker", "task": "t", "timeoutMs": bad}),
        );
        assert_eq!(code, "invalid_params");
        assert!(
            m.starts_with(
                "timeoutMs must be an integer between 30000 (30s) and 300000 (5min). Repair:"
            ),
            "{m}"
        );
        let (_, m) = fail(
            &mut root,
            "agent_steer",
            json!({"path": "b", "message": "x", "timeoutMs": bad}),
        );
        assert!(
            m.starts_with(
                "timeoutMs must be an integer between 30000 (30s) and 300000 (5min). Repair:"
            ),
            "{m}"
        );
    }
    call(&mut root, "agent_wait", json!({"path": "a"}));
    drop(root);
    w.finish(10);
}

/// agent_steer of a stopping thread answers the original's text, with a message or with only
/// a timeout (a stopping thread has no timeout to extend).
#[test]
fn steering_a_stopping_thread_is_refused_with_the_originals_texts() {
    let w = world();
    w.base.script(
        "stubborn",
        &json!({"ignore_abort": true, "turns": [{"steps": [{"delay_ms": 2500}, {"text": "done anyway"}]}]})
            .to_string(),
    );
    let mut root = w.root("stubborn", &[]);
    spawn_detached(&mut root, "s", "t");
    wait_for("s running", Duration::from_secs(10), || {
        w.sql("SELECT agent_state FROM threads WHERE path = '/root/s'")[0][0] == "running"
    });
    // The stop waits for the run, which ignores the abort for a while: s is stopping.
    let stop = root.send("agent_stop", json!({"path": "s"}));
    wait_for("the stop request", Duration::from_secs(10), || {
        w.sql("SELECT agent_stop_requested FROM threads WHERE path = '/root/s'")[0][0] == 1
    });
    let (code, m) = fail(
        &mut root,
        "agent_steer",
        json!({"path": "s", "message": "go on"}),
    );
    assert_eq!(code, "conflict");
    assert!(
        m.starts_with("Thread is stopping; wait for stopped state before resuming. Repair:"),
        "{m}"
    );
    let (code, m) = fail(
        &mut root,
        "agent_steer",
        json!({"path": "s", "timeoutMs": 30000}),
    );
    assert_eq!(code, "conflict");
    assert!(
        m.starts_with("Only a working agent has a timeout to extend. Repair:"),
        "{m}"
    );
    let r = root.response(stop, Duration::from_secs(30));
    assert_eq!(r["result"]["details"]["state"], "stopped", "{r}");
    drop(root);
    w.finish(15);
}

/// A timer armed by one serve for a run another serve holds is fired by the holder (the row is
/// the only link), and the notice goes to the thread's parent's serve.
#[test]
fn a_timer_armed_elsewhere_is_fired_by_the_serve_that_holds_the_run() {
    let w = world();
    let mut root = w.root("slow", &[("THREADBASE_TEST_TIMEOUT_DIVISOR", "100")]);
    spawn_detached(&mut root, "p", "lead");
    let mut p = w.child("/root/p", "slow");
    spawn_detached(&mut p, "q", "dig");
    wait_for("q running", Duration::from_secs(10), || {
        w.sql("SELECT agent_state FROM threads WHERE path = '/root/p/q'")[0][0] == "running"
    });
    // The root arms q's timer; p's serve holds q's run.
    call(
        &mut root,
        "agent_steer",
        json!({"path": "/root/p/q", "timeoutMs": 30000}),
    );
    wait_for("q's timeout notice at p", Duration::from_secs(10), || {
        notices(&p).iter().any(|n| n["kind"] == "timeout")
    });
    let n = notices(&p)
        .into_iter()
        .find(|n| n["kind"] == "timeout")
        .unwrap();
    assert_eq!(
        (&n["path"], &n["recipient"]),
        (&json!("/root/p/q"), &json!("/root/p"))
    );
    assert!(!notices(&root).iter().any(|n| n["kind"] == "timeout"));
    let q = call(&mut root, "agent_wait", json!({"path": "/root/p/q"}));
    assert_eq!(q["state"], "completed", "{q}");
    drop(p);
    drop(root);
    w.finish(15);
}
