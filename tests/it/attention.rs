//! What needs the user, told truly on every surface (issue 45): for each scenario, one
//! thread's condition is read from every surface side by side (the `thread` tool's poll and
//! list, texts and details; the notices its parent got; `tree`, `list --json`, `show --json`,
//! `top`'s rows; the web API; the view `thread_attention` by plain SQL) and all of them must
//! say the same word. Children are scripted agents (a dialog, a provider error, a silence, a
//! queue); the module runs on SQLite and, through `postgres::suite`, on PostgreSQL.

use crate::support::common;
use crate::support::serve_client::{Scripted, Serve};

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

struct World {
    base: Scripted,
    parent_session: PathBuf,
}

fn world(name: &str, script: Value) -> World {
    let base = Scripted::new(name);
    let header = json!({"type":"session","version":3,"id":format!("ses_{name}"),"timestamp":"2026-12-06T00:00:00.000Z","cwd":base.root});
    let parent_session = base.session_file("sessions/parent.jsonl", &[header]);
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
        self.base.serve("script", args, env)
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = common::threadbase(&self.base.db, args);
        assert!(
            out.status.success(),
            "threadbase {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn cli_json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.cli(args)).unwrap()
    }

    /// The view's word for thread `id` by plain SQL (`None`: no row, nothing needs the user).
    fn view_word(&self, id: &str) -> Option<String> {
        let v = self.cli_json(&[
            "sql",
            "--json",
            &format!(
                "SELECT attention, since, detail FROM thread_attention WHERE thread_id = '{id}'"
            ),
        ]);
        let rows = v.as_array().unwrap_or_else(|| panic!("sql --json: {v}"));
        rows.first()
            .map(|r| r["attention"].as_str().unwrap().to_string())
    }
}

/// Every surface's word for thread `id` at `path`, as `(surface, what it says)`: each is the
/// attention value where the surface has a field for it, else the state words.
fn surfaces(w: &World, s: &mut Serve, id: &str, path: &str) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let poll = s.thread(json!({"action": "poll", "id": id}));
    out.push((
        "poll details",
        poll["details"]["snapshot"]["attention"]["attention"]
            .as_str()
            .unwrap_or("-")
            .to_string(),
    ));
    let text = poll["content"][0]["text"].as_str().unwrap().to_string();
    out.push(("poll text", state_in(&text)));
    let list = s.thread(json!({"action": "list"}));
    let snap = list["details"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} in {list}"));
    out.push((
        "list details",
        snap["attention"]["attention"]
            .as_str()
            .unwrap_or("-")
            .to_string(),
    ));
    let line = list["content"][0]["text"]
        .as_str()
        .unwrap()
        .lines()
        .find(|l| l.contains(&format!("[id: {id}]")))
        .unwrap_or_else(|| panic!("{id} in {list}"))
        .to_string();
    out.push(("list text", state_in(&line)));
    let tree = w.cli(&["tree"]);
    let tline = tree
        .lines()
        .find(|l| l.contains(&format!("{path}  [")))
        .unwrap_or_else(|| panic!("{path} in {tree}"));
    out.push(("tree", between(tline, "[", "]")));
    let listed = w.cli_json(&["list", "--json"]);
    let row = listed["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .cloned()
        .unwrap();
    out.push((
        "list --json state",
        row["state"].as_str().unwrap().to_string(),
    ));
    out.push((
        "list --json attention",
        row["attention"]["attention"]
            .as_str()
            .unwrap_or("-")
            .to_string(),
    ));
    let shown = w.cli_json(&["show", id, "--json"]);
    out.push(("show state", shown["state"].as_str().unwrap().to_string()));
    out.push((
        "show attention",
        shown["attention"]["attention"]
            .as_str()
            .unwrap_or("-")
            .to_string(),
    ));
    let top = threadbase::cli::top_states(&w.base.db).unwrap();
    let (_, state) = top
        .iter()
        .find(|(p, _)| p == path)
        .unwrap_or_else(|| panic!("{path} in top {top:?}"));
    out.push(("top", state.clone()));
    out.push(("thread_attention", w.view_word(id).unwrap_or("-".into())));
    // The web page's reads: the tree's rows and the thread's detail.
    let web = crate::support::browser::Web::start(&w.base.db, "attention-token-0123456789");
    let (status, trees) = web.get("/api/trees");
    assert_eq!(status, 200, "{trees}");
    let root = trees["trees"][0]["rootSession"]
        .as_str()
        .unwrap()
        .to_string();
    let (status, rows) = web.get(&format!("/api/rows?root={root}&offset=0&limit=500"));
    assert_eq!(status, 200, "{rows}");
    let row = rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} in {rows}"));
    out.push(("web row state", row["state"].as_str().unwrap().to_string()));
    out.push((
        "web row attention",
        row["attention"]["attention"]
            .as_str()
            .unwrap_or("-")
            .to_string(),
    ));
    let (status, detail) = web.get(&format!("/api/thread?id={id}"));
    assert_eq!(status, 200, "{detail}");
    out.push((
        "web detail attention",
        detail["snapshot"]["attention"]["attention"]
            .as_str()
            .unwrap_or("-")
            .to_string(),
    ));
    out
}

/// The state words in a text: the `Status:` line's, or a list line's ` - <words>`.
fn state_in(text: &str) -> String {
    if let Some(l) = text.lines().find(|l| l.starts_with("Status: ")) {
        let words = l.trim_start_matches("Status: ");
        return words.split(" pid=").next().unwrap().trim().to_string();
    }
    // A list line: `<title> <path> - <words>[ archived][ …][, <spend>] [id: <id>]`.
    let after = text.split(" - ").nth(1).unwrap_or(text);
    let words = after.split(" [id: ").next().unwrap();
    words.split(", ").next().unwrap().to_string()
}

fn between(s: &str, open: &str, close: &str) -> String {
    let start = s.find(open).unwrap() + open.len();
    let end = start + s[start..].find(close).unwrap();
    s[start..end].to_string()
}

/// Asserts that every surface says `attention` (a word of the view, `-` for none) and that
/// the state words say `state`.
fn assert_agree(found: &[(&str, String)], attention: &str, state: &str) {
    for (surface, said) in found {
        // A surface with a field for it says the view's word; the others, the state words.
        let want = if surface.contains("details") || surface.contains("attention") {
            attention
        } else {
            state
        };
        // What follows the words (a list line's `host X unreachable since T`, the views'
        // ` since T`) is not the state.
        let agrees = said == want || said.starts_with(&format!("{want} "));
        assert!(
            agrees,
            "{surface} says {said:?}, not {want:?}; every surface: {found:?}"
        );
    }
}

fn until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn start(s: &mut Serve, task: &str) -> String {
    let r = s.thread(json!({"action": "start", "prompt": "go", "taskName": task}));
    r["details"]["snapshot"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("start: {r}"))
        .to_string()
}

fn notice_texts(s: &Serve) -> Vec<String> {
    s.notices()
        .iter()
        .map(|n| {
            n["params"]["text"]
                .as_str()
                .or_else(|| n["params"]["body"].as_str())
                .map(str::to_string)
                .unwrap_or_else(|| n["params"].to_string())
        })
        .collect()
}

#[test]
fn a_pending_question_reads_asking_everywhere_and_its_parent_is_told_how_to_answer() {
    let w = world(
        "attention_asking",
        json!({"turns": [{"steps": [
            {"ui": "select", "title": "Which database?", "options": ["sqlite", "postgres"]},
            {"text": "got: {ui}"}
        ]}]}),
    );
    let mut s = w.serve(&[("THREADBASE_UI", "parent")]);
    let id = start(&mut s, "asker");
    until("the question is pending", Duration::from_secs(20), || {
        w.view_word(&id).as_deref() == Some("asking")
    });
    assert_agree(
        &surfaces(&w, &mut s, &id, "/root/asker"),
        "asking",
        "live/asking",
    );
    until("the asking notice", Duration::from_secs(10), || {
        notice_texts(&s).iter().any(|t| t.contains("needs you"))
    });
    let notice = notice_texts(&s)
        .into_iter()
        .find(|t| t.contains("needs you"))
        .unwrap();
    assert!(
        notice.contains("Which database?")
            && notice.contains("sqlite | postgres")
            && notice.contains("thread_answer")
            && notice.contains("threadbase answer /root/asker"),
        "{notice}"
    );
    // Answered: nothing needs the user any more, on any surface.
    let answered = s.send("thread_answer", json!({"id": id, "answer": "postgres"}));
    s.response(answered, Duration::from_secs(10));
    until("the child settles", Duration::from_secs(20), || {
        w.view_word(&id).is_none() && w.cli(&["tree"]).contains("/root/asker  [live/idle]")
    });
    assert_agree(&surfaces(&w, &mut s, &id, "/root/asker"), "-", "live/idle");
    // One notice for the question, delivered once.
    let asked = notice_texts(&s)
        .iter()
        .filter(|t| t.contains("needs you"))
        .count();
    assert_eq!(asked, 1);
}

#[test]
fn a_provider_error_reads_failed_everywhere_and_its_notice_names_the_error() {
    let w = world(
        "attention_failed",
        json!({"turns": [{"steps": [
            {"error": "500 Internal Server Error: upstream overloaded\nretry later"}
        ]}]}),
    );
    let mut s = w.serve(&[]);
    let id = start(&mut s, "flaky");
    until("the failed turn", Duration::from_secs(20), || {
        w.view_word(&id).as_deref() == Some("failed")
    });
    assert_agree(
        &surfaces(&w, &mut s, &id, "/root/flaky"),
        "failed",
        "live/failed",
    );
    until("the failure notice", Duration::from_secs(10), || {
        notice_texts(&s)
            .iter()
            .any(|t| t.contains("failed its turn"))
    });
    let texts = notice_texts(&s);
    let notice = texts
        .iter()
        .find(|t| t.contains("failed its turn"))
        .unwrap();
    assert!(
        notice.contains("live/failed")
            && notice.contains("500 Internal Server Error: upstream overloaded")
            && !notice.contains("retry later"),
        "{notice}"
    );
    assert!(
        !texts.iter().any(|t| t.contains("finished its turn")),
        "a failed turn is never announced as finished: {texts:?}"
    );
    let shown = w.cli(&["show", &id]);
    assert!(
        shown.contains("needs you") && shown.contains("failed: 500 Internal Server Error"),
        "{shown}"
    );
}

#[test]
fn a_silent_busy_child_reads_stalled_everywhere_then_the_inactivity_timeout_stops_it() {
    let w = world(
        "attention_stalled",
        json!({"turns": [{"steps": [{"delay_ms": 60000}, {"text": "late"}]}]}),
    );
    let mut s = w.serve(&[
        ("THREADBASE_STALL_MS", "400"),
        ("THREADBASE_INACTIVITY_TIMEOUT_MS", "4000"),
    ]);
    let id = start(&mut s, "sleeper");
    until("the stall", Duration::from_secs(20), || {
        w.view_word(&id).as_deref() == Some("stalled")
    });
    assert_agree(
        &surfaces(&w, &mut s, &id, "/root/sleeper"),
        "stalled",
        "live/stalled",
    );
    until("the stall notice", Duration::from_secs(10), || {
        notice_texts(&s).iter().any(|t| t.contains("stalled"))
    });
    let texts = notice_texts(&s);
    let stall = texts.iter().find(|t| t.contains("stalled")).unwrap();
    assert!(
        stall.contains("live/stalled")
            && stall.contains("its last event")
            && stall.contains("threadbase stop /root/sleeper"),
        "{stall}"
    );
    // The inactivity timeout stops it and says why.
    until("the inactivity stop", Duration::from_secs(20), || {
        w.cli(&["tree"]).contains("/root/sleeper  [closed/stopped]")
    });
    let shown = w.cli_json(&["show", &id, "--json"]);
    let message = shown["exit_message"].as_str().unwrap_or_default();
    assert!(
        message.contains("THREADBASE_INACTIVITY_TIMEOUT_MS=4000"),
        "{shown}"
    );
    assert_agree(
        &surfaces(&w, &mut s, &id, "/root/sleeper"),
        "-",
        "closed/stopped",
    );
    // One notice for the one stall.
    let stalls = notice_texts(&s)
        .iter()
        .filter(|t| t.contains("stalled: live/stalled"))
        .count();
    assert_eq!(stalls, 1);
}

#[test]
fn a_queued_row_says_queued_in_the_table_and_every_view_then_launches() {
    let w = world(
        "attention_queued",
        json!({"turns": [{"steps": [{"delay_ms": 1500}, {"text": "done"}]}]}),
    );
    let mut s = w.serve(&[
        ("THREADBASE_QUEUE", "1"),
        ("PI_THREADS_MAX_THREADS", "1"),
        // The first keeps its slot when its turn ends before every surface was read (a loaded
        // machine): the queued row launches when the first is stopped, not sooner.
        ("THREADBASE_QUEUE_IDLE_MS", "600000"),
    ]);
    let first = start(&mut s, "first");
    let second = start(&mut s, "second");
    let phase = common::count(
        &w.base.db,
        &format!("SELECT count(*) FROM threads WHERE id = '{second}' AND phase = 'queued'"),
    );
    assert_eq!(phase, 1, "threads.phase of a queued row");
    assert_agree(
        &surfaces(&w, &mut s, &second, "/root/second"),
        "-",
        "live/queued",
    );
    let stop = s.thread(json!({"action": "stop", "id": first}));
    assert!(stop.get("error").is_none(), "{stop}");
    until("the queued row launches", Duration::from_secs(20), || {
        common::count(
            &w.base.db,
            &format!("SELECT count(*) FROM threads WHERE id = '{second}' AND phase <> 'queued' AND launch_seq > 0"),
        ) == 1
    });
}

#[test]
fn closed_threads_agree_a_failed_exit_needs_the_user_a_stop_does_not() {
    let w = world(
        "attention_closed",
        json!({"turns": [{"steps": [{"text": "bye"}, {"exit": 3}]}]}),
    );
    let mut s = w.serve(&[]);
    let id = start(&mut s, "crasher");
    until("the failed exit", Duration::from_secs(20), || {
        w.cli(&["tree"]).contains("/root/crasher  [closed/failed]")
    });
    assert_agree(
        &surfaces(&w, &mut s, &id, "/root/crasher"),
        "failed",
        "closed/failed",
    );
    // Archived, it no longer needs anyone.
    let r = s.thread(json!({"action": "archive", "id": id}));
    assert!(r.get("error").is_none(), "{r}");
    assert_eq!(w.view_word(&id), None);
}

#[test]
fn a_thread_of_a_host_whose_lease_ran_out_reads_unreachable_everywhere() {
    let w = world(
        "attention_unreachable",
        json!({"turns": [{"steps": [{"delay_ms": 60000}, {"text": "late"}]}]}),
    );
    // Host B holds the thread; its serve dies and its lease runs out (moved back by hand
    // rather than waiting 30 s).
    let mut b = w.serve(&[("THREADBASE_HOST_ID", "far-host")]);
    let id = start(&mut b, "far");
    until(
        "the thread is launched on far-host",
        Duration::from_secs(20),
        || {
            common::count(
            &w.base.db,
            &format!("SELECT count(*) FROM threads WHERE id = '{id}' AND launch_seq > 0 AND host_id = 'far-host'"),
        ) == 1
        },
    );
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    let db = crate::support::sql::Conn::open(&w.base.db).unwrap();
    db.execute(
        "UPDATE host_serves SET heartbeat_at = '2026-01-01T00:00:00.000Z' WHERE host_id = 'far-host'",
        (),
    )
    .unwrap();
    // Seen from this host, through a serve of the same session.
    let mut a = w.serve(&[]);
    assert_agree(
        &surfaces(&w, &mut a, &id, "/root/far"),
        "unreachable",
        "live/host unreachable",
    );
    let shown = w.cli_json(&["show", &id, "--json"]);
    assert_eq!(
        shown["attention"]["detail"], "host far-host unreachable",
        "{shown}"
    );
}

#[test]
fn a_thread_whose_serve_died_is_stale_after_restore_and_needs_nobody() {
    let w = world(
        "attention_stale",
        json!({"turns": [{"steps": [{"delay_ms": 60000}, {"text": "late"}]}]}),
    );
    let mut first = w.serve(&[]);
    let id = start(&mut first, "orphan");
    until("the thread is launched", Duration::from_secs(20), || {
        common::count(
            &w.base.db,
            &format!("SELECT count(*) FROM threads WHERE id = '{id}' AND launch_seq > 0"),
        ) == 1
    });
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    // This host sees the serve's pid gone at once: owner gone, before any restore.
    let tree = w.cli(&["tree"]);
    assert!(tree.contains("/root/orphan  [live/owner gone]"), "{tree}");
    let shown = w.cli_json(&["show", &id, "--json"]);
    assert_eq!(shown["attention"]["attention"], "owner_gone", "{shown}");
    w.cli(&["restore"]);
    // Restored as stale: nothing needs the user, on any surface.
    let mut second = w.serve(&[]);
    assert_agree(
        &surfaces(&w, &mut second, &id, "/root/orphan"),
        "-",
        "closed/stale",
    );
}
