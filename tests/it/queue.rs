//! The durable queue (`THREADBASE_QUEUE=1`, issue 30) through a real `threadbase serve` whose
//! children are scripted agents: starts over `PI_THREADS_MAX_THREADS` are queued (live, phase
//! `queued`, with their position) and launched in order as threads close; a queued thread
//! stopped before its launch never starts; a `wait` waits through the queue; queued rows
//! survive a SIGKILL of their serve and the next serve of the session launches them; an idle
//! thread yields its slot to a waiting row (`THREADBASE_QUEUE_IDLE_MS`, issue 45); starts sent
//! in one burst queue in the order of their request lines.

use crate::support::serve_client;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_client::{Scripted, Serve};

struct World {
    base: Scripted,
    parent_session: PathBuf,
}

/// Children answer every prompt with one message and then sit idle (live) until stopped.
fn world(name: &str) -> World {
    let base = Scripted::new(name);
    let header = json!({"type":"session","version":3,"id":format!("ses_{name}"),"timestamp":"2026-12-04T00:00:00.000Z","cwd":base.root});
    let parent_session = base.session_file("sessions/parent.jsonl", &[header]);
    base.script("script", &json!({"default_reply": "done"}).to_string());
    World {
        base,
        parent_session,
    }
}

impl World {
    /// A serve with the queue on and `max` slots whose idle threads keep their slots (they
    /// would yield one only after ten minutes idle), so a slot frees when a thread closes.
    fn serve(&self, max: &str) -> Serve {
        self.serve_yielding(max, "600000")
    }

    /// A serve with the queue on, `max` slots, and `THREADBASE_QUEUE_IDLE_MS=idle_ms`.
    fn serve_yielding(&self, max: &str, idle_ms: &str) -> Serve {
        let args = vec![
            "--session-file".into(),
            self.parent_session.display().to_string(),
        ];
        self.base.serve(
            "script",
            args,
            &[
                ("THREADBASE_QUEUE", "1"),
                ("PI_THREADS_MAX_THREADS", max),
                ("THREADBASE_QUEUE_IDLE_MS", idle_ms),
            ],
        )
    }

    fn db(&self) -> crate::support::sql::Conn {
        let conn = crate::support::sql::Conn::open(&self.base.db).unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        conn
    }

    /// `(status, launch_seq, pid IS NOT NULL, exit_kind)` of the thread at `path`.
    fn row(&self, path: &str) -> (String, i64, bool, Option<String>) {
        self.db()
            .query_row(
                "SELECT status, launch_seq, pid IS NOT NULL, exit_kind FROM threads WHERE path = ?1",
                [path],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap()
    }

    /// Paths of the threads launched so far, in launch order.
    fn launch_order(&self) -> Vec<String> {
        let conn = self.db();
        let mut stmt = conn
            .prepare(
                "SELECT path FROM threads WHERE launch_seq > 0 ORDER BY live_started_at, rowid",
            )
            .unwrap();

        stmt.query_map((), |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<Vec<String>>>()
            .unwrap()
    }

    /// Waits until the thread at `path` was launched.
    fn until_launched(&self, path: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.row(path).1 == 0 {
            assert!(Instant::now() < deadline, "{path} was never launched");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn start(s: &mut Serve, task: &str) -> Value {
    s.thread(json!({"action": "start", "prompt": format!("do {task}"), "taskName": task}))
}

fn snapshot(r: &Value) -> &Value {
    &r["details"]["snapshot"]
}

fn stop(s: &mut Serve, path: &str) -> Value {
    s.thread(json!({"action": "stop", "id": path}))
}

/// Live threads as `list state=live` shows them: `(path, phase, queuePosition)`.
fn live(s: &mut Serve) -> Vec<(String, String, Option<i64>)> {
    s.live_threads()
        .iter()
        .map(|t| {
            (
                t["path"].as_str().unwrap().to_string(),
                t["phase"].as_str().unwrap().to_string(),
                t["queuePosition"].as_i64(),
            )
        })
        .collect()
}

#[test]
fn queue_fills_the_limit_queues_three_more_and_launches_them_in_order_as_threads_close() {
    let w = world("queue_order");
    let mut s = w.serve("2");
    for task in ["a", "b"] {
        let r = start(&mut s, task);
        assert_ne!(snapshot(&r)["phase"], "queued", "{r}");
        assert!(snapshot(&r).get("queuePosition").is_none(), "{r}");
    }
    for (n, task) in ["c", "d", "e"].into_iter().enumerate() {
        let r = start(&mut s, task);
        let snap = snapshot(&r);
        assert_eq!(snap["status"], "live", "{r}");
        assert_eq!(snap["phase"], "queued", "{r}");
        assert_eq!(snap["queuePosition"], n as i64 + 1, "{r}");
        assert_eq!(snap["path"], format!("/root/{task}"), "{r}");
        assert!(snap["id"].as_str().unwrap().starts_with("thread_"), "{r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains(&format!("queued at position {}", n + 1)),
            "{text}"
        );
        assert!(text.contains("Status: live/queued"), "{text}");
        // Its name is reserved: a second start with it is refused.
        let err = s.thread_error(json!({"action": "start", "prompt": "x", "taskName": task}));
        assert_eq!(err["code"], "conflict", "{err}");
    }
    let listed = live(&mut s);
    let queued: Vec<_> = listed.iter().filter(|t| t.1 == "queued").collect();
    assert_eq!(
        queued
            .iter()
            .map(|t| (t.0.as_str(), t.2))
            .collect::<Vec<_>>(),
        [
            ("/root/c", Some(1)),
            ("/root/d", Some(2)),
            ("/root/e", Some(3))
        ],
        "{listed:?}"
    );
    let text = s.thread(json!({"action": "list", "state": "live"}))["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(text.contains("/root/c - live/queued queued #1"), "{text}");
    assert_eq!(w.launch_order(), ["/root/a", "/root/b"]);

    // Each close launches the oldest queued thread, one at a time.
    stop(&mut s, "/root/a");
    w.until_launched("/root/c");
    assert_eq!(w.row("/root/d").1, 0);
    let listed = live(&mut s);
    assert!(
        listed.contains(&("/root/d".into(), "queued".into(), Some(1))),
        "{listed:?}"
    );
    stop(&mut s, "/root/b");
    w.until_launched("/root/d");
    assert_eq!(w.row("/root/e").1, 0);
    stop(&mut s, "/root/c");
    w.until_launched("/root/e");
    assert_eq!(
        w.launch_order(),
        ["/root/a", "/root/b", "/root/c", "/root/d", "/root/e"]
    );
    // A launched queued thread runs its prompt like any other.
    let r = s.thread(json!({"action": "wait", "id": "/root/e", "timeoutMs": 20000}));
    assert_eq!(snapshot_of_wait(&r)["phase"], "idle", "{r}");
    assert!(live(&mut s).iter().all(|t| t.1 != "queued"));
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

/// A queued start's result says, in its text and its details alike, that the prompt was not
/// accepted (no process has it yet): `Prompt accepted: no` and `promptAccepted: false`, as
/// docs/queue-and-questions.md promises; a start that launches says yes and true.
#[test]
fn queue_a_queued_starts_details_say_prompt_accepted_false() {
    let w = world("queue_accepted");
    let mut s = w.serve("1");
    let r = start(&mut s, "a");
    assert_eq!(r["details"]["promptAccepted"], true, "{r}");
    let r = start(&mut s, "b");
    assert_eq!(snapshot(&r)["phase"], "queued", "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("\nPrompt accepted: no\n"), "{text}");
    assert_eq!(r["details"]["kind"], "started", "{r}");
    assert_eq!(r["details"]["promptAccepted"], false, "{r}");
    assert!(
        r["details"]["note"]
            .as_str()
            .unwrap()
            .starts_with("queued at position 1:"),
        "{r}"
    );
    stop(&mut s, "/root/b");
    stop(&mut s, "/root/a");
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

fn snapshot_of_wait(r: &Value) -> &Value {
    &r["details"]["snapshot"]
}

#[test]
fn queue_a_queued_thread_stopped_before_its_launch_never_starts() {
    let w = world("queue_stop");
    let mut s = w.serve("1");
    start(&mut s, "a");
    let r = start(&mut s, "b");
    assert_eq!(snapshot(&r)["phase"], "queued", "{r}");
    let r = stop(&mut s, "/root/b");
    let snap = snapshot(&r);
    assert_eq!(snap["status"], "closed", "{r}");
    assert_eq!(snap["exit"]["kind"], "stopped", "{r}");
    assert_eq!(r["details"]["alreadyClosed"], false, "{r}");
    // The slot that frees launches nothing: the stopped thread is out of the queue.
    stop(&mut s, "/root/a");
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        w.row("/root/b"),
        ("closed".into(), 0, false, Some("stopped".into()))
    );
    let events: i64 = w
        .db()
        .query_row(
            "SELECT count(*) FROM thread_events e JOIN threads t ON t.id = e.thread_id WHERE t.path = '/root/b' AND e.type = 'thread_closed'",
            (),
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(events, 1);
    // Stopping it again says it was closed already.
    let r = stop(&mut s, "/root/b");
    assert_eq!(r["details"]["alreadyClosed"], true, "{r}");
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn queue_wait_on_a_queued_thread_waits_through_the_queue() {
    let w = world("queue_wait");
    let mut s = w.serve("1");
    start(&mut s, "a");
    start(&mut s, "b");
    // Timed out while still queued.
    let r = s.thread(json!({"action": "wait", "id": "/root/b", "timeoutMs": 300}));
    assert_eq!(r["details"]["timedOut"], true, "{r}");
    assert_eq!(snapshot_of_wait(&r)["phase"], "queued", "{r}");
    let waiting = s.send(
        "thread",
        json!({"action": "wait", "id": "/root/b", "timeoutMs": 30000}),
    );
    std::thread::sleep(Duration::from_millis(300));
    stop(&mut s, "/root/a");
    let r = s.response(waiting, Duration::from_secs(40));
    let d = &r["result"]["details"];
    assert_eq!(d["timedOut"], false, "{r}");
    assert_eq!(d["snapshot"]["phase"], "idle", "{r}");
    assert_eq!(d["snapshot"]["result"]["text"], "done", "{r}");
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn queue_rows_survive_a_sigkill_of_serve_and_the_next_serve_launches_them() {
    let w = world("queue_crash");
    let mut s = w.serve("1");
    start(&mut s, "a");
    start(&mut s, "b");
    start(&mut s, "c");
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    // The queued rows are still there, waiting; the dead serve's child is left over.
    assert_eq!(w.row("/root/b").0, "live");
    assert_eq!(w.row("/root/b").1, 0);
    let mut s = w.serve("1");
    // The restore pass closes /root/a as stale; its slot goes to the oldest queued thread.
    w.until_launched("/root/b");
    assert_eq!(w.row("/root/a").3.as_deref(), Some("stale"));
    assert_eq!(w.row("/root/c").1, 0);
    let listed = live(&mut s);
    assert!(
        listed.contains(&("/root/c".into(), "queued".into(), Some(1))),
        "{listed:?}"
    );
    stop(&mut s, "/root/b");
    w.until_launched("/root/c");
    assert_eq!(w.launch_order(), ["/root/a", "/root/b", "/root/c"]);
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

/// The text of the first notice `s` emitted about `path` containing `needle`, waiting for it.
fn notice_about(s: &Serve, path: &str, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = s.notices().into_iter().find_map(|n| {
            let text = n["params"]["text"].as_str()?.to_string();
            (n["params"]["path"] == path && text.contains(needle)).then_some(text)
        });
        if let Some(text) = found {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no notice about {path} saying {needle:?}: {:#?}",
            s.notices()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The seconds a yield notice says its thread was idle (`… (idle 1.2s).`).
fn idle_seconds(text: &str) -> f64 {
    let at = text.find("(idle ").expect("an idle time") + "(idle ".len();
    let end = at + text[at..].find("s)").expect("seconds");
    text[at..end].parse().unwrap()
}

/// Issue 45: with a limit of 1 and `THREADBASE_QUEUE_IDLE_MS` at its default 0, the queue moves
/// without any stop: the first child finishes its turn and, idle, yields its slot to the
/// second start (closed as idle cleanup closes it: stopped, resumable, its parent told which
/// row took the slot), then the second yields to the third. The last one keeps its slot:
/// nothing waits for it.
#[test]
fn queue_an_idle_thread_yields_its_slot_to_the_oldest_queued_start() {
    let w = world("queue_yield");
    let mut s = w.serve_yielding("1", "0");
    let a = start(&mut s, "a");
    assert_ne!(snapshot(&a)["phase"], "queued", "{a}");
    let b = start(&mut s, "b");
    assert_eq!(snapshot(&b)["phase"], "queued", "{b}");
    assert_eq!(snapshot(&b)["queuePosition"], 1, "{b}");
    let c = start(&mut s, "c");
    assert_eq!(snapshot(&c)["phase"], "queued", "{c}");

    w.until_launched("/root/b");
    let text = notice_about(&s, "/root/a", "yielded its slot");
    assert!(
        text.starts_with("Thread \"do a\" (/root/a) was stopped: closed/stopped. It yielded its slot to /root/b (idle "),
        "{text}"
    );
    assert!(text.ends_with("\nLast answer:\ndone"), "{text}");
    assert!(idle_seconds(&text) >= 0.0, "{text}");
    assert_eq!(
        w.row("/root/a"),
        ("closed".into(), 1, true, Some("stopped".into()))
    );
    let r = s.thread(json!({"action": "poll", "id": "/root/a"}));
    assert_eq!(snapshot(&r)["resumable"], true, "{r}");
    assert_eq!(snapshot(&r)["exit"]["kind"], "stopped", "{r}");

    // The second finishes its turn and yields to the third in turn.
    w.until_launched("/root/c");
    let text = notice_about(&s, "/root/b", "yielded its slot");
    assert!(
        text.contains("It yielded its slot to /root/c (idle "),
        "{text}"
    );
    assert_eq!(w.launch_order(), ["/root/a", "/root/b", "/root/c"]);
    let r = s.thread(json!({"action": "wait", "id": "/root/c", "timeoutMs": 20000}));
    assert_eq!(snapshot_of_wait(&r)["phase"], "idle", "{r}");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(w.row("/root/c").0, "live");
    assert!(s.notices().iter().all(|n| n["params"]["path"] != "/root/c"
        || !n["params"]["text"].as_str().unwrap().contains("yielded")));
    // No one stopped anything: every close was a yield.
    let stops: i64 = w
        .db()
        .query_row(
            "SELECT count(*) FROM threads WHERE exit_kind = 'stopped' AND exit_message LIKE 'It yielded its slot to %'",
            (),
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stops, 2);
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

/// With `THREADBASE_QUEUE_IDLE_MS=60000` an idle thread keeps its slot for a minute: the queued
/// start does not launch meanwhile, and a close still moves the queue at once.
#[test]
fn queue_an_idle_thread_keeps_its_slot_until_queue_idle_ms() {
    let w = world("queue_keep");
    let mut s = w.serve_yielding("1", "60000");
    start(&mut s, "a");
    start(&mut s, "b");
    let r = s.thread(json!({"action": "wait", "id": "/root/a", "timeoutMs": 20000}));
    assert_eq!(snapshot_of_wait(&r)["phase"], "idle", "{r}");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(w.row("/root/a").0, "live");
    assert_eq!(w.row("/root/b").1, 0);
    assert!(
        s.notices()
            .iter()
            .all(|n| !n["params"]["text"].as_str().unwrap().contains("yielded")),
        "{:#?}",
        s.notices()
    );
    stop(&mut s, "/root/a");
    w.until_launched("/root/b");
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

/// A thread not idle long enough yet yields once it is: the serve wakes for it, with no commit
/// to prompt it (`THREADBASE_QUEUE_IDLE_MS=700`).
#[test]
fn queue_an_idle_thread_yields_once_idle_for_queue_idle_ms() {
    let w = world("queue_later");
    let mut s = w.serve_yielding("1", "700");
    start(&mut s, "a");
    start(&mut s, "b");
    w.until_launched("/root/b");
    let text = notice_about(&s, "/root/a", "yielded its slot");
    assert!(
        text.contains("It yielded its slot to /root/b (idle "),
        "{text}"
    );
    assert!(idle_seconds(&text) >= 0.7, "{text}");
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

/// Starts sent in one burst (the parallel tool calls of one assistant message, forwarded as
/// lines in the message's order, which serve runs concurrently) reserve in the order of their
/// lines: the first takes the slot and the rest queue in request order.
#[test]
fn queue_starts_sent_in_one_burst_queue_in_request_order() {
    let w = world("queue_burst");
    let mut s = w.serve_yielding("1", "600000");
    let tasks = ["a", "b", "c", "d", "e"];
    let lines: Vec<String> = tasks
        .iter()
        .enumerate()
        .map(|(n, t)| {
            json!({"id": 1000 + n, "method": "thread", "params": {"action": "start", "prompt": format!("do {t}"), "taskName": t}})
                .to_string()
        })
        .collect();
    s.raw(&lines.join("\n"));
    for (n, t) in tasks.iter().enumerate() {
        let r = s.response(1000 + n as u64, Duration::from_secs(30));
        let snap = &r["result"]["details"]["snapshot"];
        assert_eq!(snap["path"], format!("/root/{t}"), "{r}");
        if n == 0 {
            assert_ne!(snap["phase"], "queued", "{r}");
        } else {
            assert_eq!(snap["phase"], "queued", "{r}");
            assert_eq!(snap["queuePosition"], n as i64, "{r}");
        }
    }
    let conn = w.db();
    let mut stmt = conn
        .prepare("SELECT path FROM threads ORDER BY rowid")
        .unwrap();
    let order = stmt
        .query_map((), |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<Vec<String>>>()
        .unwrap();
    assert_eq!(
        order,
        ["/root/a", "/root/b", "/root/c", "/root/d", "/root/e"]
    );
    let listed = live(&mut s);
    let queued: Vec<_> = listed
        .iter()
        .filter(|t| t.1 == "queued")
        .map(|t| (t.0.as_str(), t.2))
        .collect();
    assert_eq!(
        queued,
        [
            ("/root/b", Some(1)),
            ("/root/c", Some(2)),
            ("/root/d", Some(3)),
            ("/root/e", Some(4))
        ]
    );
    drop(stmt);
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

/// Contract B: with `PI_SUBAGENTS_MAX_CONCURRENT=1` a second and third `agent_spawn` are queued
/// (state `starting`, status `Queued (position N)`); each settles in turn and the next one is
/// launched; a queued one stopped before its launch never runs.
#[test]
fn queue_agent_spawns_over_the_concurrency_limit_are_queued_and_run_in_order() {
    use crate::agent as b;
    let w = b::world();
    let mut root = w.root(
        "slow",
        &[
            ("THREADBASE_QUEUE", "1"),
            ("PI_SUBAGENTS_MAX_CONCURRENT", "1"),
        ],
    );
    let spawn = |s: &mut Serve, path: &str| {
        b::call(
            s,
            "agent_spawn",
            json!({"path": path, "type": "worker", "task": format!("task {path}"), "wait": false}),
        )
    };
    let a = spawn(&mut root, "a");
    assert_eq!(a["state"], "starting", "{a}");
    let q1 = spawn(&mut root, "b");
    assert_eq!(
        (&q1["state"], &q1["status"]),
        (&json!("starting"), &json!("Queued (position 1)")),
        "{q1}"
    );
    let q2 = spawn(&mut root, "c");
    assert_eq!(q2["status"], "Queued (position 2)", "{q2}");
    let q3 = spawn(&mut root, "d");
    assert_eq!(q3["status"], "Queued (position 3)", "{q3}");
    // Stopped while queued: stopped, never launched; the others move up.
    let d = b::call(&mut root, "agent_stop", json!({"path": "/root/d"}));
    assert_eq!(d["state"], "stopped", "{d}");
    // Each settles in turn and the next one runs.
    for path in ["/root/a", "/root/b", "/root/c"] {
        let v = b::call(
            &mut root,
            "agent_wait",
            json!({"path": path, "timeoutMs": 30000}),
        );
        assert_eq!(v["state"], "completed", "{path}: {v}");
        assert_eq!(
            v["output"],
            format!("slow answer to task {}", &path[6..]),
            "{v}"
        );
    }
    let conn = crate::support::sql::Conn::open(&w.base.db).unwrap();
    let order: Vec<(String, i64)> = conn
        .prepare("SELECT path, launch_seq FROM threads ORDER BY launch_seq > 0, CASE WHEN launch_seq > 0 THEN live_started_at END, path")
        .unwrap()
        .query_map((), |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(
        order,
        [
            ("/root/d".to_string(), 0),
            ("/root/a".to_string(), 1),
            ("/root/b".to_string(), 1),
            ("/root/c".to_string(), 1)
        ]
    );
    root.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

/// A blocking `agent_spawn` (`wait` true, the default) over the concurrency limit waits
/// through the queue and the run, and answers with the settled view, as an unqueued one does.
#[test]
fn queue_a_blocking_agent_spawn_waits_through_the_queue_for_its_settled_view() {
    use crate::agent as b;
    let w = b::world();
    let mut root = w.root(
        "slow",
        &[
            ("THREADBASE_QUEUE", "1"),
            ("PI_SUBAGENTS_MAX_CONCURRENT", "1"),
        ],
    );
    let a = b::call(
        &mut root,
        "agent_spawn",
        json!({"path": "a", "type": "worker", "task": "task a", "wait": false}),
    );
    assert_eq!(a["state"], "starting", "{a}");
    let blocked = b::call(
        &mut root,
        "agent_spawn",
        json!({"path": "b", "type": "worker", "task": "task b"}),
    );
    assert_eq!(blocked["state"], "completed", "{blocked}");
    assert_eq!(blocked["output"], "slow answer to task b", "{blocked}");
    // It ran after a: a had settled first.
    let a = b::call(&mut root, "agent_status", json!({"path": "/root/a"}));
    assert_eq!(a["state"], "completed", "{a}");
}

/// A list batch's positions and questions (`store::queue::positions_of_threads`,
/// `store::questions::pending_of_threads`: one query each over a JSON array of ids): several
/// threads of two managers, some waiting in the queue, one claimed, some asking, one asked
/// twice, one answered, one closed and an unknown id, each in its place in the array and the
/// same as the one-id lookups give.
#[test]
fn queue_a_batch_reads_each_threads_position_and_question_in_its_place() {
    use crate::support::common;
    use threadbase::domain::QuestionKind;
    use threadbase::domain::ThreadId;
    use threadbase::store::{questions, queue, ThreadIds};

    let db = common::temp_db();
    let store = threadbase::Store::open(&db.path).unwrap();
    let m1 = common::manager(&store, "ses_batch_1");
    let m2 = common::manager(&store, "ses_batch_2");
    let id = |n: u64| common::tid(n);
    common::add(
        &store,
        &[
            common::thread(&id(1), m1, "/root/asking", true),
            common::thread(&id(2), m1, "/root/q1", true),
            common::thread(&id(3), m1, "/root/claimed", true),
            common::thread(&id(4), m1, "/root/q2", true),
            common::thread(&id(5), m1, "/root/closed", false),
            common::thread(&id(6), m2, "/root/other_q1", true),
            common::thread(&id(7), m1, "/root/answered", true),
            common::thread(&id(8), m1, "/root/twice", true),
            common::thread(&id(9), m1, "/root/plain", true),
        ],
    );
    let at = "2026-12-04T00:00:00.000Z";
    let asked = store
        .write(|tx| {
            for n in [2, 3, 4, 6] {
                queue::mark(tx, &ThreadId::new(id(n)), at)?;
            }
            // A claimed slot: no longer waiting, so it has no position and q2 is second.
            tx.execute_script(&crate::support::sql::with(
                "UPDATE threads SET dequeued_at = ?2 WHERE id = ?1",
                (id(3), at),
            ))?;
            let ask = |n: u64, request: &str, title: &str| {
                questions::insert(
                    tx,
                    &questions::NewQuestion {
                        thread_id: &ThreadId::new(id(n)),
                        launch_seq: 1,
                        request_id: request,
                        kind: QuestionKind::Confirm,
                        title: Some(title),
                        message: None,
                        options: None,
                        at,
                        deadline_ms: i64::MAX,
                    },
                )
            };
            let first = ask(1, "r1", "Proceed?")?;
            let answered = ask(7, "r7", "Done?")?;
            questions::answer(tx, answered, &serde_json::json!(true), "cli", at)?;
            let older = ask(8, "r8a", "First?")?;
            ask(8, "r8b", "Second?")?;
            Ok((first, older))
        })
        .unwrap();

    // The array's order is not the rows' order; an unknown id reads as nothing.
    let order = [9, 4, 1, 5, 6, 3, 8, 2, 7, 99];
    let typed = order.map(|n| ThreadId::new(id(n)));
    let ids = ThreadIds::new(&typed).unwrap();
    let conn = store.read().unwrap();
    let positions = queue::positions_of_threads(&conn, &ids).unwrap();
    let pending = questions::pending_of_threads(&conn, &ids).unwrap();
    assert_eq!(
        positions,
        [
            None,
            Some(2),
            None,
            None,
            Some(1),
            None,
            None,
            Some(1),
            None,
            None
        ]
    );
    let shown: Vec<Option<(i64, String)>> = pending
        .iter()
        .map(|q| q.as_ref().map(|q| (q.id, q.title.clone().unwrap())))
        .collect();
    assert_eq!(
        shown,
        [
            None,
            None,
            Some((asked.0, "Proceed?".into())),
            None,
            None,
            None,
            Some((asked.1, "First?".into())),
            None,
            None,
            None
        ]
    );
    for (at, n) in order.into_iter().enumerate() {
        assert_eq!(
            positions[at],
            queue::position(&conn, &ThreadId::new(id(n))).unwrap(),
            "{n}"
        );
        assert_eq!(
            pending[at],
            questions::pending_of(&conn, &ThreadId::new(id(n))).unwrap(),
            "{n}"
        );
        if let Some(q) = &pending[at] {
            assert_eq!(q.thread_id, id(n));
        }
    }
    // An empty batch reads nothing.
    let none = ThreadIds::new(&[]).unwrap();
    assert!(queue::positions_of_threads(&conn, &none)
        .unwrap()
        .is_empty());
    assert!(questions::pending_of_threads(&conn, &none)
        .unwrap()
        .is_empty());
}
