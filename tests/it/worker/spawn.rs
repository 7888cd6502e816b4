//! `threads_spawn`: the derived id, idempotent retries and the initial prompt delivered once,
//! relaunches after a failed launch or a crashed coordinator, the slot limit and the queue over
//! it, the validation of directories, granted paths and agent profiles, and the worker's model.

use super::{
    call, error, message, spawn_params, tool, wait_until, wait_view, world, COORD, K1_MESSAGE,
    QUICK, REVIEW_WORKER,
};
use crate::support::common;
use crate::support::serve_client::top_status;
use serde_json::{json, Value};
use std::time::Duration;

#[test]
fn spawn_is_idempotent_and_delivers_the_initial_prompt_once() {
    let w = world(QUICK);
    let mut s = w.serve(COORD, &[]);
    let params = json!({"key": "review", "title": "Review", "directory": w.work(), "task": "Check the docs"});
    let v = tool(&mut s, "threads_spawn", params.clone());
    assert_eq!(common::keys(&v), common::WORKER_VIEW_KEYS);
    assert_eq!(v["workerID"], REVIEW_WORKER, "the derived id");
    assert_eq!(v["coordinatorID"], COORD);
    assert_eq!(v["key"], "review");
    assert_eq!(v["title"], "Review");
    assert_eq!(v["directory"], w.work());
    assert_eq!(v["agent"], Value::Null);
    assert_eq!(v["report"], Value::Null);
    assert_eq!(v["hidden"], false);
    let v = wait_view(&mut s, REVIEW_WORKER, |v| v["outcome"] == "succeeded");
    assert_eq!(v["hidden"], false);
    // No --model in its args: the model is learnt from the session after the first run.
    assert_eq!(
        v["model"],
        json!({"providerID": "scripted", "id": "scripted-model"})
    );

    // The worker runs as a top-level session in its directory, with its id in the header.
    let file = w.session_file(REVIEW_WORKER);
    assert_eq!(file.parent().unwrap(), w.parent_session.parent().unwrap());
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["id"], REVIEW_WORKER);
    assert_eq!(header["cwd"], w.work());
    assert!(header.get("parentSession").is_none());
    let users = w.user_messages(REVIEW_WORKER);
    assert_eq!(users.len(), 1, "{users:?}");
    // The prompt is opzero1/threads' text exactly: the task, then the worker instructions,
    // ending at "…does not establish task success." with nothing after it.
    assert_eq!(
        users[0],
        format!(
            "Check the docs\n\nYou are a managed worker assigned to {}. Work only within the assigned scope. You may use native subagent for bounded tasks or reviews when useful, within the brief's delegation limits and your permissions. Delegation is optional. Pass relevant context, scope, and constraints to each subagent. Do not call threads_spawn. Review your subagents' results and resolve any outstanding work before reporting. Only you call threads_report with the combined verdict, summary, and evidence; subagents return results to you. Runtime completion alone does not establish task success.",
            w.work()
        )
    );
    let pids = w.worker_processes(REVIEW_WORKER);
    assert_eq!(pids.len(), 1, "one worker process");
    let environ = std::fs::read(format!("/proc/{}/environ", pids[0])).unwrap();
    let environ: Vec<String> = environ
        .split(|b| *b == 0)
        .map(|kv| String::from_utf8_lossy(kv).into_owned())
        .collect();
    assert!(environ.contains(&format!("THREADBASE_COORDINATOR_ID={COORD}")));
    assert!(environ.contains(&"PI_THREADS_PATH=/root".to_string()));
    assert!(environ.contains(&"PI_THREADS_SELF_ID=".to_string()));

    // Identical retries, sequential and concurrent: the same worker, the prompt once.
    let again = tool(&mut s, "threads_spawn", params.clone());
    assert_eq!(again["workerID"], REVIEW_WORKER);
    assert_eq!(again["outcome"], "succeeded");
    let ids: Vec<u64> = (0..4)
        .map(|_| s.send("threads_spawn", params.clone()))
        .collect();
    for id in ids {
        let r = s.response(id, Duration::from_secs(30));
        assert_eq!(r["result"]["details"]["workerID"], REVIEW_WORKER, "{r}");
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(w.user_messages(REVIEW_WORKER).len(), 1, "Trap 8");
    assert_eq!(w.worker_processes(REVIEW_WORKER).len(), 1);
    let (state, message_id, initial): (String, String, String) = w
        .conn()
        .query_row(
            "SELECT mb.state, mb.message_id, t.initial_message_id FROM mailbox mb JOIN threads t ON t.id = mb.thread_id WHERE mb.direction = 'to_child'",
            (),
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(state, "delivered");
    assert_eq!(message_id, initial);
    assert!(initial.starts_with("msg_") && initial.len() == 36);

    // A changed request under the key is refused, and nothing is written.
    for changed in [
        json!({"key": "review", "title": "Review", "directory": w.work(), "task": "Other"}),
        json!({"key": "review", "title": "Other", "directory": w.work(), "task": "Check the docs"}),
        json!({"key": "review", "title": "Review", "directory": w.base.root.display().to_string(), "task": "Check the docs"}),
        json!({"key": "review", "title": "Review", "directory": w.work(), "task": "Check the docs", "paths": [w.base.root.display().to_string()]}),
    ] {
        let e = error(&mut s, "threads_spawn", changed);
        assert_eq!(e["code"], "conflict");
        assert!(message(&e).starts_with("This spawn key already belongs to a different request"));
    }
    // `paths: []` is the same request as no paths.
    let mut same = params.clone();
    same["paths"] = json!([]);
    assert_eq!(
        tool(&mut s, "threads_spawn", same)["workerID"],
        REVIEW_WORKER
    );

    // list: {workers}, hidden included; the status `top` shows for it.
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(list["workers"].as_array().unwrap().len(), 1);
    assert_eq!(top_status(&w.base.db, &list, REVIEW_WORKER), "no report");
    assert_eq!(
        w.count("SELECT count(*) FROM threads WHERE coordinator_id IS NOT NULL"),
        1
    );
    let e = error(&mut s, "threads_list", json!({"x": 1}));
    assert_eq!(e["code"], "invalid_params");
    let e = error(&mut s, "threads_nope", json!({}));
    assert!(message(&e).contains("threads_spawn, threads_list, threads_send"));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn a_retry_after_a_failed_launch_relaunches_and_delivers_what_is_pending() {
    let w = world(r#"{"startup_exit": 3, "startup_stderr": "boom"}"#);
    let mut s = w.serve(COORD, &[]);
    let params =
        json!({"key": "review", "title": "Review", "directory": w.work(), "task": "Try again"});
    tool(&mut s, "threads_spawn", params.clone());
    let v = wait_view(&mut s, REVIEW_WORKER, |v| v["outcome"] == "failed");
    assert_eq!(v["report"], Value::Null);
    assert_eq!(
        w.count("SELECT count(*) FROM mailbox WHERE state = 'pending'"),
        1,
        "the prompt was never accepted"
    );
    let list = tool(&mut s, "threads_list", json!({}));
    assert_eq!(top_status(&w.base.db, &list, REVIEW_WORKER), "failed");
    // The agent works now; the identical retry resumes the saved session and delivers once.
    std::fs::write(w.base.root.join("script.json"), QUICK).unwrap();
    let v = tool(&mut s, "threads_spawn", params.clone());
    assert_eq!(v["workerID"], REVIEW_WORKER);
    wait_until("the prompt to arrive", Duration::from_secs(10), || {
        w.user_messages(REVIEW_WORKER).len() == 1
    });
    wait_view(&mut s, REVIEW_WORKER, |v| v["outcome"] == "succeeded");
    assert_eq!(
        w.count("SELECT count(*) FROM mailbox WHERE state = 'pending'"),
        0
    );
    tool(&mut s, "threads_spawn", params.clone());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(w.user_messages(REVIEW_WORKER).len(), 1);
    s.close(Duration::from_secs(20));

    // After the coordinator's serve is gone (workers stopped), a new serve of the same session
    // relaunches the worker on the identical retry without re-sending the prompt.
    let mut s = w.serve(COORD, &[]);
    let v = tool(&mut s, "threads_spawn", params);
    assert_eq!(v["outcome"], "succeeded", "the last run's outcome stands");
    assert_eq!(w.worker_processes(REVIEW_WORKER).len(), 1);
    let r = tool(
        &mut s,
        "threads_send",
        json!({"workerID": REVIEW_WORKER, "key": "k1", "text": "one more"}),
    );
    assert_eq!(
        r,
        json!({"workerID": REVIEW_WORKER, "messageID": K1_MESSAGE})
    );
    wait_until("the send to arrive", Duration::from_secs(10), || {
        w.user_messages(REVIEW_WORKER).len() == 2
    });
    assert_eq!(w.user_messages(REVIEW_WORKER)[1], "one more");
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn slot_limit_counts_hidden_and_unreported_workers() {
    let w = world(QUICK);
    let mut s = w.serve(COORD, &[("THREADBASE_MAX_WORKERS", "2")]);
    let a = tool(&mut s, "threads_spawn", spawn_params(&w, "a", "A"));
    let a_id = a["workerID"].as_str().unwrap().to_string();
    wait_view(&mut s, &a_id, |v| v["outcome"] == "succeeded");
    tool(&mut s, "threads_hide", json!({"workerID": a_id}));
    let b = tool(&mut s, "threads_spawn", spawn_params(&w, "b", "B"));
    let b_id = b["workerID"].as_str().unwrap().to_string();
    wait_view(&mut s, &b_id, |v| v["outcome"] == "succeeded");
    let before = w.count("SELECT count(*) FROM threads");
    let e = error(&mut s, "threads_spawn", spawn_params(&w, "c", "C"));
    assert_eq!(e["code"], "limit");
    assert!(
        message(&e).starts_with("Coordinator worker limit reached (2)"),
        "{e}"
    );
    assert_eq!(w.count("SELECT count(*) FROM threads"), before);
    // An existing worker's identical retry is not limited.
    assert_eq!(
        tool(&mut s, "threads_spawn", spawn_params(&w, "a", "A"))["workerID"],
        a_id
    );
    // A report frees a slot.
    let mut ws = w.serve(&a_id, &[]);
    tool(
        &mut ws,
        "threads_report",
        json!({"verdict": "FAIL", "summary": "broken", "evidence": []}),
    );
    ws.close(Duration::from_secs(20));
    let c = tool(&mut s, "threads_spawn", spawn_params(&w, "c", "C"));
    assert_eq!(
        c["workerID"],
        threadbase::contract::worker::worker_identity(
            &threadbase::domain::SessionId::new(COORD),
            "c"
        )
        .as_str()
    );
    s.close(Duration::from_secs(20));

    // An invalid setting warns and falls back to 4.
    let mut s = w.serve("ses_second", &[("THREADBASE_MAX_WORKERS", "99")]);
    for k in ["a", "b", "c", "d"] {
        tool(&mut s, "threads_spawn", spawn_params(&w, k, k));
    }
    let e = error(&mut s, "threads_spawn", spawn_params(&w, "e", "e"));
    assert!(message(&e).starts_with("Coordinator worker limit reached (4)"));
    s.close(Duration::from_secs(20));
    let stderr = String::from_utf8_lossy(&s.stderr.lock().unwrap()).into_owned();
    assert!(
        stderr.contains(r#"Ignoring invalid THREADBASE_MAX_WORKERS="99" (expected an integer from 1 to 32); using default 4."#),
        "{stderr}"
    );
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn directories_granted_paths_and_agent_profiles() {
    let w = world(QUICK);
    let mut s = w.serve(COORD, &[]);
    let root = &w.base.root;
    std::fs::write(root.join("a_file"), "x").unwrap();
    for d in ["alpha", "beta", "star*dir", "q?dir"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::os::unix::fs::symlink(root.join("beta"), root.join("beta_link")).unwrap();
    std::os::unix::fs::symlink("/", root.join("root_link")).unwrap();
    let p = |name: &str| root.join(name).display().to_string();
    let spawn = |paths: Value| json!({"key": "g", "title": "Grants", "directory": w.work(), "task": "Use grants", "paths": paths});
    tool(&mut s, "threads_list", json!({}));
    let before = w.count("SELECT count(*) FROM threads");

    for dir in [
        "work".to_string(),
        p("missing"),
        p("a_file"),
        "".to_string(),
    ] {
        let e = error(
            &mut s,
            "threads_spawn",
            json!({"key": "d", "title": "t", "directory": dir, "task": "x"}),
        );
        assert_eq!(e["code"], "invalid_params", "{dir}: {e}");
        if !dir.is_empty() {
            assert!(
                message(&e).starts_with("directory must be an existing absolute directory"),
                "{e}"
            );
        }
    }
    let cases: Vec<(Value, String)> = vec![
        (json!(["relative/dir"]), "Granted path must be absolute: relative/dir".into()),
        (json!([p("missing")]), format!("Granted path must be an existing directory: {}", p("missing"))),
        (json!([p("a_file")]), format!("Granted path must be an existing directory: {}", p("a_file"))),
        (json!(["/"]), "Granted path cannot be a filesystem root: /".into()),
        (json!([p("root_link")]), format!("Granted path cannot be a filesystem root: {}", p("root_link"))),
        (json!([p("star*dir")]), format!("Granted path contains a character that permission patterns cannot match literally: {}", p("star*dir"))),
        (json!([p("q?dir")]), "permission patterns cannot match literally".into()),
        (json!([p("alpha"), ""]), "paths items must be non-empty strings".into()),
        (json!((0..17).map(|_| p("alpha")).collect::<Vec<_>>()), "paths must list at most 16 directories, got 17".into()),
    ];
    for (paths, expected) in cases {
        let e = error(&mut s, "threads_spawn", spawn(paths.clone()));
        assert_eq!(e["code"], "invalid_params", "{paths}: {e}");
        assert!(message(&e).contains(&expected), "{paths}: {e}");
        assert!(message(&e).contains("Repair:"), "{e}");
    }
    assert_eq!(
        w.count("SELECT count(*) FROM threads"),
        before,
        "rejected spawns write nothing"
    );

    // Symlinks resolve, duplicates go, the list is sorted; 16 entries are fine.
    let mut sixteen = vec![p("beta_link"), p("alpha"), p("beta")];
    sixteen.extend((0..13).map(|_| p("alpha")));
    let v = tool(&mut s, "threads_spawn", spawn(json!(sixteen)));
    let id = v["workerID"].as_str().unwrap().to_string();
    let granted: String = w
        .conn()
        .query_row(
            "SELECT granted_paths FROM threads WHERE id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&granted).unwrap(),
        json!([p("alpha"), p("beta")])
    );
    let fp: String = w
        .conn()
        .query_row(
            "SELECT fingerprint FROM threads WHERE id = ?1",
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        fp,
        threadbase::contract::worker::fingerprint(
            "Grants",
            &w.work(),
            "Use grants",
            None,
            Some(&[p("alpha"), p("beta")])
        )
    );
    wait_until("the prompt", Duration::from_secs(10), || {
        w.user_messages(&id).len() == 1
    });
    assert!(w.user_messages(&id)[0].contains(&format!(
        "Work only within the assigned scope. You may also use these granted directories when the task requires them: {}, {}. You may use",
        p("alpha"),
        p("beta")
    )));
    // The same grants spelled differently are the same request; other grants are not.
    let v = tool(
        &mut s,
        "threads_spawn",
        spawn(json!([p("beta"), p("alpha")])),
    );
    assert_eq!(v["workerID"], id.as_str());
    let e = error(&mut s, "threads_spawn", spawn(json!([p("alpha")])));
    assert_eq!(e["code"], "conflict");

    // Agent profiles: missing, invalid, and one that picks the model.
    let e = error(
        &mut s,
        "threads_spawn",
        json!({"key": "r", "title": "t", "directory": w.work(), "task": "x", "agent": "reviewer"}),
    );
    assert_eq!(e["code"], "invalid_params");
    assert!(
        message(&e).starts_with("Unknown agent \"reviewer\": no profile at"),
        "{e}"
    );
    assert!(message(&e).contains("Repair:"));
    let agents = root.join("agent").join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("bad.json"), r#"{"args": ["--session", "x"]}"#).unwrap();
    let e = error(
        &mut s,
        "threads_spawn",
        json!({"key": "r", "title": "t", "directory": w.work(), "task": "x", "agent": "bad"}),
    );
    assert!(message(&e).contains("Unsupported child Pi arg"), "{e}");
    let e = error(
        &mut s,
        "threads_spawn",
        json!({"key": "r", "title": "t", "directory": w.work(), "task": "x", "agent": "../bad"}),
    );
    assert!(message(&e).starts_with("Unknown agent \"../bad\""), "{e}");
    std::fs::write(
        agents.join("reviewer.json"),
        r#"{"args": ["--model", "prov/model-one"]}"#,
    )
    .unwrap();
    let v = tool(
        &mut s,
        "threads_spawn",
        json!({"key": "r", "title": "t", "directory": w.work(), "task": "x", "agent": "reviewer"}),
    );
    assert_eq!(v["agent"], "reviewer");
    assert_eq!(v["model"], json!({"providerID": "prov", "id": "model-one"}));
    let e = error(
        &mut s,
        "threads_spawn",
        json!({"key": "r", "title": "t", "directory": w.work(), "task": "x"}),
    );
    assert_eq!(
        e["code"], "conflict",
        "dropping the agent changes the request"
    );
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn a_rejected_prompt_is_a_failed_run_and_stays_pending() {
    let w = world(r#"{"reject_prompts": "No API key found for scripted."}"#);
    let mut s = w.serve(COORD, &[("THREADBASE_MAX_WORKERS", "1")]);
    let v = tool(&mut s, "threads_spawn", spawn_params(&w, "review", "Task"));
    assert_eq!(v["outcome"], "failed");
    assert_eq!(
        w.count("SELECT count(*) FROM mailbox WHERE state = 'pending' AND direction = 'to_child'"),
        1
    );
    assert_eq!(
        top_status(
            &w.base.db,
            &tool(&mut s, "threads_list", json!({})),
            REVIEW_WORKER
        ),
        "failed"
    );
    // A failed worker frees its slot.
    tool(&mut s, "threads_spawn", spawn_params(&w, "other", "Task"));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn a_crashed_coordinator_leaves_an_interrupted_worker_that_a_retry_relaunches() {
    let w = world(r#"{"turns": [{"steps": [{"delay_ms": 30000}, {"text": "late"}]}]}"#);
    let mut s = w.serve(COORD, &[("THREADBASE_MAX_WORKERS", "1")]);
    let params = spawn_params(&w, "review", "Long task");
    tool(&mut s, "threads_spawn", params.clone());
    wait_until("the prompt", Duration::from_secs(10), || {
        w.user_messages(REVIEW_WORKER).len() == 1
    });
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    // The next serve of any session restores the orphan: closed as stale, its process killed.
    let mut s = w.serve(COORD, &[("THREADBASE_MAX_WORKERS", "1")]);
    wait_until("the orphan to be killed", Duration::from_secs(10), || {
        w.worker_processes(REVIEW_WORKER).is_empty()
    });
    let snap = call(
        &mut s,
        "threads.snapshot",
        json!({"coordinatorIDs": [COORD]}),
    );
    assert_eq!(snap["workers"][0]["outcome"], "interrupted");
    // Its slot is free; the identical retry relaunches it without re-sending the prompt.
    let v = tool(&mut s, "threads_spawn", params);
    assert_eq!(v["outcome"], "interrupted");
    assert_eq!(w.worker_processes(REVIEW_WORKER).len(), 1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(w.user_messages(REVIEW_WORKER).len(), 1);
    tool(&mut s, "threads_spawn", spawn_params(&w, "next", "Next"));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

/// The original sets a worker's model from its runtime at spawn: with the coordinator's model
/// known (its argv, `--parent-args`), the spawn's view already carries it; without one it is
/// learnt from the session after the first run (see `spawn_is_idempotent_and_delivers_the_initial_prompt_once`).
#[test]
fn the_coordinators_model_is_the_workers_model_at_spawn() {
    let w = world(QUICK);
    for (parent_args, want) in [
        (
            r#"["pi","--model","prov/parent-model"]"#,
            json!({"providerID": "prov", "id": "parent-model"}),
        ),
        (
            r#"["pi","--provider","prov","--model","parent-model"]"#,
            json!({"providerID": "prov", "id": "parent-model"}),
        ),
        // Pi takes no inline `--model=…` (it would be an unknown extension flag): no model is
        // known from it, so none is shown until the session tells it.
        (r#"["pi","--model=prov/inline-model"]"#, Value::Null),
    ] {
        let mut s = w.serve_with(COORD, &[], &["--parent-args", parent_args]);
        let key = format!("k{}", threadbase::ids::random_hex(4));
        let v = tool(
            &mut s,
            "threads_spawn",
            json!({"key": key, "title": "T", "directory": w.work(), "task": "Check"}),
        );
        // Without a model from the coordinator's argv, none is shown until the session says
        // one: the scripted worker's run may already have told it by the time spawn answers.
        let learnt = json!({"providerID": "scripted", "id": "scripted-model"});
        if want.is_null() {
            assert!(
                v["model"].is_null() || v["model"] == learnt,
                "{parent_args}: {v}"
            );
        } else {
            assert_eq!(v["model"], want, "{parent_args}: {v}");
        }
        let id = v["workerID"].as_str().unwrap().to_string();
        let list = tool(&mut s, "threads_list", json!({}));
        let listed = list["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["workerID"] == id.as_str())
            .unwrap()
            .clone();
        if want.is_null() {
            assert!(
                listed["model"].is_null() || listed["model"] == learnt,
                "{parent_args}: {list}"
            );
        } else {
            assert_eq!(listed["model"], want, "{parent_args}: {list}");
        }
        let v = wait_view(&mut s, &id, |v| v["outcome"] == "succeeded");
        if want.is_null() {
            assert_eq!(
                v["model"],
                json!({"providerID": "scripted", "id": "scripted-model"})
            );
        }
        s.close(Duration::from_secs(20));
    }
    assert!(w.base.leftovers().is_empty());
}

/// Issue 30, `THREADBASE_QUEUE=1`: a spawn over the slot limit is recorded and queued (its view
/// says `status: "queued (position N)"`) instead of refused; a queued worker interrupted before
/// its launch never starts; when a slot frees the oldest queued worker is brought up with its
/// prompt.
#[test]
fn queue_a_spawn_over_the_slot_limit_waits_and_starts_when_a_slot_frees() {
    let w = world(
        r#"{"turns": [{"steps": [{"delay_ms": 30000}, {"text": "late"}]}], "default_reply": "done: {prompt}"}"#,
    );
    let mut s = w.serve(
        COORD,
        &[("THREADBASE_MAX_WORKERS", "1"), ("THREADBASE_QUEUE", "1")],
    );
    let slow = tool(
        &mut s,
        "threads_spawn",
        spawn_params(&w, "slow", "Slow work"),
    );
    let slow = slow["workerID"].as_str().unwrap().to_string();
    assert!(slow.starts_with("ses_"));
    let q1 = tool(
        &mut s,
        "threads_spawn",
        spawn_params(&w, "q1", "First queued"),
    );
    assert_eq!(q1["status"], "queued (position 1)", "{q1}");
    assert_eq!(q1["outcome"], Value::Null, "{q1}");
    let q1 = q1["workerID"].as_str().unwrap().to_string();
    let q2 = tool(
        &mut s,
        "threads_spawn",
        spawn_params(&w, "q2", "Second queued"),
    );
    assert_eq!(q2["status"], "queued (position 2)", "{q2}");
    let q2 = q2["workerID"].as_str().unwrap().to_string();
    // The identical retry of a queued spawn answers the same queued worker.
    let again = tool(
        &mut s,
        "threads_spawn",
        spawn_params(&w, "q1", "First queued"),
    );
    assert_eq!(again["workerID"], q1.as_str());
    // Interrupted while queued: never launched.
    let v = tool(&mut s, "threads_interrupt", json!({"workerID": q2}));
    assert_eq!(v["outcome"], "interrupted", "{v}");
    assert!(v.get("status").is_none(), "{v}");
    // The busy worker's interrupt frees the slot: q1 comes up with its prompt.
    tool(&mut s, "threads_interrupt", json!({"workerID": slow}));
    let v = wait_view(&mut s, &q1, |v| v.get("status").is_none());
    assert_eq!(common::keys(&v), common::WORKER_VIEW_KEYS, "{v}");
    wait_until("q1's launch", Duration::from_secs(20), || {
        w.count(&format!("SELECT launch_seq FROM threads WHERE id = '{q1}'")) == 1
    });
    wait_until("q1's prompt", Duration::from_secs(20), || {
        w.user_messages(&q1)
            .iter()
            .any(|m| m.starts_with("First queued"))
    });
    let launched: Vec<(String, i64)> = w
        .conn()
        .prepare("SELECT id, launch_seq FROM threads ORDER BY rowid")
        .unwrap()
        .query_map((), |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(launched, [(slow, 1), (q1, 1), (q2, 0)]);
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

/// Hosts (issue 33): serves of one coordinator on two hosts spawn the same key at the same
/// moment: one worker row and one worker process, and both answer with it.
#[test]
fn two_hosts_spawning_one_key_at_once_make_one_worker() {
    if !crate::hosts::pid_namespaces_or_skip("two_hosts_spawning_one_key_at_once") {
        return;
    }
    let w = world(QUICK);
    // Each host's serve is pid 1 of a PID namespace of its own.
    let mut a = w.serve_in_pid_namespace(COORD, "host-a");
    let mut b = w.serve_in_pid_namespace(COORD, "host-b");
    let params = json!({"key": "review", "title": "Review", "directory": w.work(), "task": "Check the docs"});
    let on_a = a.send("threads_spawn", params.clone());
    let on_b = b.send("threads_spawn", params);
    for (s, id) in [(&a, on_a), (&b, on_b)] {
        let r = s.response(id, Duration::from_secs(60));
        assert_eq!(r["result"]["details"]["workerID"], REVIEW_WORKER, "{r}");
    }
    let rows: i64 = w
        .conn()
        .query_row(
            "SELECT count(*) FROM threads WHERE coordinator_id IS NOT NULL",
            (),
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(rows, 1);
    let launches: i64 = w
        .conn()
        .query_row(
            "SELECT launch_seq FROM threads WHERE id = ?1",
            [REVIEW_WORKER],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(launches, 1, "launched once");
    let v = wait_view(&mut a, REVIEW_WORKER, |v| v["outcome"] == "succeeded");
    assert_eq!(v["workerID"], REVIEW_WORKER);
    assert_eq!(
        w.worker_processes(REVIEW_WORKER).len(),
        1,
        "one worker process"
    );
    assert_eq!(w.user_messages(REVIEW_WORKER).len(), 1, "the prompt once");
    a.close(Duration::from_secs(20));
    b.close(Duration::from_secs(20));
}

/// Issue 33: a worker held on a host whose lease ran out is listed by `threads_list` on
/// another host with `hostUnreachable` (`{hostId, since}`) beside the contract's ten fields;
/// a list on one host has no such field.
#[test]
fn threads_list_says_a_worker_of_an_unreachable_host_is_so() {
    let w = world(QUICK);
    let mut b = w.serve(COORD, &[("THREADBASE_HOST_ID", "host-b")]);
    let params = json!({"key": "review", "title": "Review", "directory": w.work(), "task": "Check the docs"});
    tool(&mut b, "threads_spawn", params);
    let v = wait_view(&mut b, REVIEW_WORKER, |v| v["outcome"] == "succeeded");
    assert!(v.get("hostUnreachable").is_none(), "{v}");
    wait_until("the worker's process", Duration::from_secs(20), || {
        w.count("SELECT count(*) FROM threads WHERE status = 'live' AND pid IS NOT NULL") == 1
    });
    // Host B's serve dies and its lease runs out (its last heartbeat moved back).
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    w.conn()
        .execute(
            "UPDATE host_serves SET heartbeat_at = '2026-01-01T00:00:00.000Z' WHERE host_id = 'host-b'",
            (),
        )
        .unwrap();
    let mut a = w.serve(COORD, &[("THREADBASE_HOST_ID", "host-a")]);
    let v = wait_view(&mut a, REVIEW_WORKER, |v| {
        v.get("hostUnreachable").is_some()
    });
    assert_eq!(
        v["hostUnreachable"],
        json!({"hostId": "host-b", "since": "2026-01-01T00:00:00.000Z"}),
        "{v}"
    );
    a.close(Duration::from_secs(20));
}
