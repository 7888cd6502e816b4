//! A child's questions reaching its parent (`THREADBASE_UI=parent`, issue 30) through a real
//! `threadbase serve` whose children are scripted agents that open a dialog and then say what
//! they got (`{ui}`): the dialog becomes a pending `ui_requests` row and the child waits; `wait`
//! returns with the question, `poll` and `list` show it; `thread_answer` or `threadbase answer`
//! answers it once; a timeout, a stop and a SIGKILL of the serve each end the row consistently.

use crate::support::serve_client;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_client::{Scripted, Serve};

struct World {
    base: Scripted,
    parent_session: PathBuf,
}

/// The child's one turn: `dialog`, then a message with the answer it got.
fn world(name: &str, dialog: Value) -> World {
    let base = Scripted::new(name);
    let header = json!({"type":"session","version":3,"id":format!("ses_{name}"),"timestamp":"2026-12-04T00:00:00.000Z","cwd":base.root});
    let parent_session = base.session_file("sessions/parent.jsonl", &[header]);
    let script = json!({"turns": [{"steps": [dialog, {"text": "got: {ui}"}]}]});
    base.script("script", &script.to_string());
    World {
        base,
        parent_session,
    }
}

impl World {
    fn serve(&self, env: &[(&str, &str)]) -> Serve {
        let args = vec![
            "--session-file".into(),
            self.parent_session.display().to_string(),
        ];
        let mut all = vec![("THREADBASE_UI", "parent")];
        all.extend_from_slice(env);
        self.base.serve("script", args, &all)
    }

    /// `(state, answer, answered_by)` of every question, oldest first.
    fn questions(&self) -> Vec<(String, Option<String>, Option<String>)> {
        let conn = crate::support::sql::Conn::open(&self.base.db).unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        let mut stmt = conn
            .prepare("SELECT state, answer, answered_by FROM ui_requests ORDER BY id")
            .unwrap();

        stmt.query_map((), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<Vec<_>>>()
            .unwrap()
    }

    fn until_questions(
        &self,
        what: &str,
        ok: impl Fn(&[(String, Option<String>, Option<String>)]) -> bool,
    ) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let q = self.questions();
            if ok(&q) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: {q:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn start(s: &mut Serve) -> String {
    let r = s.thread(json!({"action": "start", "prompt": "ask", "taskName": "asker"}));
    r["details"]["snapshot"]["id"].as_str().unwrap().to_string()
}

fn wait(s: &mut Serve, id: &str) -> Value {
    s.thread(json!({"action": "wait", "id": id, "timeoutMs": 20000}))
}

fn text(r: &Value) -> String {
    r["content"][0]["text"].as_str().unwrap().to_string()
}

#[test]
fn questions_a_childs_confirm_waits_for_thread_answer_and_the_child_gets_it() {
    let w = world(
        "q_confirm",
        json!({"ui": "confirm", "title": "Proceed?", "message": "Delete the cache"}),
    );
    let mut s = w.serve(&[]);
    let id = start(&mut s);
    // The wait comes back as soon as the question is asked, with the question.
    let r = wait(&mut s, &id);
    let snap = &r["details"]["snapshot"];
    assert_eq!(r["details"]["timedOut"], false, "{r}");
    assert_eq!(snap["status"], "live", "{r}");
    assert_eq!(snap["question"]["kind"], "confirm", "{r}");
    assert_eq!(snap["question"]["title"], "Proceed?", "{r}");
    assert_eq!(snap["question"]["message"], "Delete the cache", "{r}");
    assert_eq!(
        snap["nextSuggestedActions"],
        json!(["thread_answer", "poll", "stop"]),
        "{r}"
    );
    let t = text(&r);
    assert!(
        t.contains("Question (confirm) waiting for your answer: Proceed?"),
        "{t}"
    );
    assert!(
        t.contains(&format!(
            "thread_answer tool: {{ \"id\": \"{id}\", \"answer\": true }}"
        )),
        "{t}"
    );
    // Poll and list show it too; the child is still waiting.
    let r = s.thread(json!({"action": "poll", "id": id}));
    assert_eq!(
        r["details"]["snapshot"]["question"]["kind"], "confirm",
        "{r}"
    );
    let r = s.thread(json!({"action": "list"}));
    assert!(text(&r).contains("question pending (confirm)"), "{r}");
    assert_eq!(w.questions(), [("pending".into(), None, None)]);
    // A wrong kind of answer is refused and changes nothing.
    let bad = s.send("thread_answer", json!({"id": id, "answer": "perhaps"}));
    let bad = s.response(bad, Duration::from_secs(10));
    assert_eq!(bad["error"]["code"], "invalid_params", "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Repair:"),
        "{bad}"
    );
    // Answered once.
    let ok = s.send("thread_answer", json!({"id": id, "answer": true}));
    let ok = s.response(ok, Duration::from_secs(10));
    assert_eq!(ok["result"]["details"]["kind"], "answered", "{ok}");
    assert_eq!(ok["result"]["details"]["answer"], true, "{ok}");
    let again = s.send("thread_answer", json!({"id": id, "answer": false}));
    let again = s.response(again, Duration::from_secs(10));
    assert_eq!(again["error"]["code"], "conflict", "{again}");
    // The child got `true` and went on.
    let r = wait(&mut s, &id);
    let snap = &r["details"]["snapshot"];
    assert_eq!(snap["phase"], "idle", "{r}");
    assert_eq!(snap["result"]["text"], "got: true", "{r}");
    assert!(snap.get("question").is_none(), "{r}");
    assert_eq!(
        w.questions(),
        [(
            "answered".into(),
            Some("true".into()),
            Some("thread_answer".into())
        )]
    );
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn questions_threadbase_answer_answers_a_select_with_one_of_its_options() {
    let w = world(
        "q_select",
        json!({"ui": "select", "title": "Which?", "options": ["red", "blue"]}),
    );
    let mut s = w.serve(&[]);
    let id = start(&mut s);
    let r = wait(&mut s, &id);
    assert_eq!(
        r["details"]["snapshot"]["question"]["options"],
        json!(["red", "blue"]),
        "{r}"
    );
    let answer = |value: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(&w.base.db)
            .args(["answer", "/root/asker", value])
            .output()
            .unwrap()
    };
    let out = answer("green");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[\"red\",\"blue\"]") && err.contains("Repair:"),
        "{err}"
    );
    let out = answer("blue");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("with \"blue\""));
    let r = wait(&mut s, &id);
    assert_eq!(
        r["details"]["snapshot"]["result"]["text"], "got: blue",
        "{r}"
    );
    assert_eq!(
        w.questions(),
        [(
            "answered".into(),
            Some("\"blue\"".into()),
            Some("cli".into())
        )]
    );
    // Nothing is pending any more: a second answer is refused.
    let out = answer("red");
    assert!(!out.status.success());
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn questions_a_question_not_answered_in_time_is_cancelled_and_the_row_says_timed_out() {
    let w = world("q_timeout", json!({"ui": "input", "title": "Name?"}));
    let mut s = w.serve(&[("THREADBASE_UI_TIMEOUT_MS", "400")]);
    let id = start(&mut s);
    w.until_questions("the question times out", |q| {
        q == [("timed_out".into(), None, Some("timeout".into()))]
    });
    let r = wait(&mut s, &id);
    assert_eq!(
        r["details"]["snapshot"]["result"]["text"], "got: cancelled",
        "{r}"
    );
    // Too late to answer.
    let late = s.send("thread_answer", json!({"id": id, "answer": "x"}));
    let late = s.response(late, Duration::from_secs(10));
    assert_eq!(late["error"]["code"], "conflict", "{late}");
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn questions_a_stop_while_a_question_is_pending_cancels_it() {
    let w = world("q_stop", json!({"ui": "confirm", "title": "Sure?"}));
    let mut s = w.serve(&[]);
    let id = start(&mut s);
    wait(&mut s, &id);
    s.thread(json!({"action": "stop", "id": id}));
    assert_eq!(
        w.questions(),
        [("cancelled".into(), None, Some("stop".into()))]
    );
    let late = s.send("thread_answer", json!({"id": id, "answer": true}));
    let late = s.response(late, Duration::from_secs(10));
    assert_eq!(late["error"]["code"], "conflict", "{late}");
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn questions_a_crash_of_serve_while_a_question_is_pending_cancels_it_at_restore() {
    let w = world("q_crash", json!({"ui": "editor", "title": "Edit"}));
    let mut s = w.serve(&[]);
    let id = start(&mut s);
    wait(&mut s, &id);
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    // The row outlives the serve, still pending: nobody answered and nothing cancelled it.
    assert_eq!(w.questions(), [("pending".into(), None, None)]);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&w.base.db)
        .arg("restore")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        w.questions(),
        [("cancelled".into(), None, Some("restore".into()))]
    );
    let s = w.serve(&[]);
    let mut s = s;
    let r = s.thread(json!({"action": "poll", "id": id}));
    assert_eq!(r["details"]["snapshot"]["status"], "closed", "{r}");
    assert!(r["details"]["snapshot"].get("question").is_none(), "{r}");
    s.close(Duration::from_secs(20));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !w.base.leftovers().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(w.base.leftovers().is_empty());
}

/// Contract B: a subagent's question is a notice for its parent (here the main conversation's
/// serve), and `thread_answer` with the subagent's path answers it.
#[test]
fn questions_a_subagents_question_is_a_notice_for_its_parent_and_thread_answer_answers_it() {
    use crate::agent as b;
    let w = b::world();
    w.base.script(
        "asks",
        &json!({"turns": [{"steps": [{"ui": "confirm", "title": "Deploy?"}, {"text": "got: {ui}"}]}]})
            .to_string(),
    );
    let mut root = w.root("asks", &[("THREADBASE_UI", "parent")]);
    let v = b::call(
        &mut root,
        "agent_spawn",
        json!({"path": "a", "type": "worker", "task": "deploy", "wait": false}),
    );
    assert_eq!(v["state"], "starting", "{v}");
    b::wait_for("the question's notice", Duration::from_secs(20), || {
        b::notices(&root).iter().any(|n| {
            n["text"]
                .as_str()
                .is_some_and(|t| t.contains("/root/a asks (confirm): Deploy?"))
        })
    });
    let notice = b::notices(&root)
        .into_iter()
        .find(|n| {
            n["text"]
                .as_str()
                .is_some_and(|t| t.contains("asks (confirm)"))
        })
        .unwrap();
    assert!(
        notice["text"].as_str().unwrap().contains("thread_answer"),
        "{notice}"
    );
    let ok = root.send("thread_answer", json!({"id": "/root/a", "answer": true}));
    let ok = root.response(ok, Duration::from_secs(10));
    assert_eq!(ok["result"]["details"]["answer"], true, "{ok}");
    let v = b::call(
        &mut root,
        "agent_wait",
        json!({"path": "/root/a", "timeoutMs": 30000}),
    );
    assert_eq!(v["state"], "completed", "{v}");
    assert_eq!(v["output"], "got: true", "{v}");
    root.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

/// `list` of several live threads, some asking and some waiting in the queue
/// (`THREADBASE_QUEUE=1`, a limit of two): each row shows its own question or its own position,
/// read for the whole batch at once, and follows as a question is answered and a slot frees.
#[test]
fn questions_a_list_shows_each_threads_question_or_queue_position() {
    let w = world(
        "q_list",
        json!({"ui": "confirm", "title": "Proceed?", "message": "Go on"}),
    );
    // Idle threads keep their slots (THREADBASE_QUEUE_IDLE_MS): a slot frees when one closes.
    let mut s = w.serve(&[
        ("THREADBASE_QUEUE", "1"),
        ("PI_THREADS_MAX_THREADS", "2"),
        ("THREADBASE_QUEUE_IDLE_MS", "600000"),
    ]);
    for task in ["a", "b", "c", "d"] {
        s.thread(json!({"action": "start", "prompt": "ask", "taskName": task}));
    }
    let two_pending = |q: &[(String, Option<String>, Option<String>)]| {
        q.iter().filter(|r| r.0 == "pending").count() == 2
    };
    w.until_questions("the two launched threads ask", two_pending);
    // `(path, queuePosition, question's kind)` of every live thread, in list order.
    let listed = |s: &mut Serve| -> Vec<(String, Option<i64>, Option<String>)> {
        s.live_threads()
            .iter()
            .map(|t| {
                (
                    t["path"].as_str().unwrap().to_string(),
                    t["queuePosition"].as_i64(),
                    t["question"]["kind"].as_str().map(str::to_string),
                )
            })
            .collect()
    };
    let asking = |p: &str| (p.to_string(), None, Some("confirm".to_string()));
    let queued = |p: &str, n: i64| (p.to_string(), Some(n), None);
    assert_eq!(
        listed(&mut s),
        [
            asking("/root/a"),
            asking("/root/b"),
            queued("/root/c", 1),
            queued("/root/d", 2)
        ]
    );
    let text = text(&s.thread(json!({"action": "list", "state": "live"})));
    assert!(text.contains("question pending (confirm)"), "{text}");
    assert!(text.contains("queued #2"), "{text}");

    // a's answer ends its question (its turn goes on to idle); the others stay as they were.
    let ok = s.send("thread_answer", json!({"id": "/root/a", "answer": true}));
    let ok = s.response(ok, Duration::from_secs(10));
    assert_eq!(ok["result"]["details"]["kind"], "answered", "{ok}");
    let r = s.thread(json!({"action": "wait", "id": "/root/a", "timeoutMs": 20000}));
    assert_eq!(r["details"]["snapshot"]["phase"], "idle", "{r}");
    assert_eq!(
        listed(&mut s),
        [
            ("/root/a".to_string(), None, None),
            asking("/root/b"),
            queued("/root/c", 1),
            queued("/root/d", 2)
        ]
    );

    // a's stop frees its slot: c launches and asks, d moves up.
    s.thread(json!({"action": "stop", "id": "/root/a"}));
    w.until_questions("c asks", two_pending);
    assert_eq!(
        listed(&mut s),
        [asking("/root/b"), asking("/root/c"), queued("/root/d", 1)]
    );
    s.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}
