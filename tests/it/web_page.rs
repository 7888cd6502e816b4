//! Issue 50: the web page made for a person, in a real headless Chromium (`support::browser`):
//! each row's task and the detail's prompt and follow-ups, the "needs you" band and the title's
//! count, the timeline of a tree, a page that survives a restart of `web` (its kept token), the
//! Send box that belongs to one thread, `web --db` of a missing file, and the host filter of a
//! team database. Screenshots go to `target/web-screenshots/` and, for the README, `docs/img/`
//! (THREADBASE_UPDATE_SCREENSHOTS=1).

use crate::support::browser::{self, Browser, Web};
use crate::support::common;

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use threadbase::Store;

const TOKEN: &str = "web-page-token-0123456789";

/// Live rows `/root/a` and `/root/b` held by this test process (so Send is offered).
fn two_live(db: &Path) -> (String, String) {
    let store = Store::open(db).unwrap();
    let m = common::manager(&store, "ses_page");
    let mut a = common::thread(&common::tid(1), m, "/root/a", true);
    a.prompt = Some("Survey the API\nand list what is missing.".into());
    let b = common::thread(&common::tid(2), m, "/root/b", true);
    common::add(&store, &[a, b]);
    let me = threadbase::runtime::signals::ProcessIdentity::current();
    store
        .write(|tx| {
            tx.execute_script(&crate::support::sql::with(
                "UPDATE threads SET owner_pid = ?1, owner_started_at = ?2",
                rusqlite::params![me.pid, me.started_at],
            ))?;
            Ok(())
        })
        .unwrap();
    (common::tid(1), common::tid(2))
}

fn open_row(b: &Browser, path: &str) {
    b.wait_for(
        path,
        &format!("return document.querySelector('.row.thread[data-path=\"{path}\"]') !== null"),
        Duration::from_secs(10),
    );
    b.click(&format!(".row.thread[data-path=\"{path}\"]"));
    b.wait_for(
        &format!("{path}'s detail"),
        &format!("const h = document.getElementById('detail-path'); return h && h.textContent === '{path}'"),
        Duration::from_secs(10),
    );
}

fn text(b: &Browser, script: &str) -> String {
    b.eval(script).as_str().unwrap_or("").to_string()
}

/// 5: the Send box belongs to the thread it was opened for: its button names that thread, a
/// switch to another thread takes the box (and its text) away, and coming back brings the
/// draft back; what is sent goes to the thread the box was opened for.
#[test]
fn the_send_box_belongs_to_its_thread_across_switches() {
    if !browser::available("the_send_box_belongs_to_its_thread_across_switches") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("page.sqlite");
    let (a, b_id) = two_live(&db);
    let web = Web::start(&db, TOKEN);
    let b = Browser::start();
    b.goto(&web.url());
    open_row(&b, "/root/a");
    b.click("#act-send");
    assert_eq!(
        text(&b, "return document.getElementById('send-go').textContent"),
        "Send to /root/a"
    );
    b.eval("document.getElementById('send-message').value = 'only for a'; return true;");
    open_row(&b, "/root/b");
    assert_eq!(
        b.eval("return document.getElementById('send-box') === null"),
        json!(true),
        "the box for /root/a is gone once /root/b is open"
    );
    b.click("#act-send");
    assert_eq!(
        text(&b, "return document.getElementById('send-go').textContent"),
        "Send to /root/b"
    );
    assert_eq!(
        text(&b, "return document.getElementById('send-message').value"),
        ""
    );
    open_row(&b, "/root/a");
    b.wait_for(
        "a's draft back",
        "const m = document.getElementById('send-message'); return m && m.value === 'only for a'",
        Duration::from_secs(5),
    );
    b.click("#send-go");
    let (thread, payload): (String, String) = common::poll(
        Duration::from_secs(10),
        Duration::from_millis(50),
        "the send row",
        || {
            let conn = rusqlite::Connection::open(&db).unwrap();
            conn.busy_timeout(Duration::from_secs(10)).unwrap();
            conn.query_row(
                "SELECT thread_id, payload FROM commands WHERE kind = 'send'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .ok()
        },
    );
    assert_eq!(thread, a, "sent to /root/a, not {b_id}");
    let p: Value = serde_json::from_str(&payload).unwrap();
    assert_eq!(p["message"], "only for a", "{payload}");
    assert_eq!(common::count(&db, "SELECT count(*) FROM commands"), 1);
}

/// 6: `web --db` of a missing file refuses as `tree` does (the same `Repair:` text), and
/// creates nothing: no database, no lock file, no token file.
#[test]
fn web_refuses_a_missing_database_as_tree_does_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("typo.sqlite");
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(&db)
            .args(args)
            .env_remove("THREADBASE_DB")
            .env_remove("THREADBASE_TOKEN")
            .output()
            .unwrap()
    };
    let web = run(&["web", "--port", "0"]);
    let tree = run(&["tree"]);
    assert!(!web.status.success(), "{web:?}");
    let said = String::from_utf8_lossy(&web.stderr).into_owned();
    assert!(
        said.contains("No database at") && said.contains("Repair:"),
        "{said}"
    );
    assert_eq!(
        said,
        String::from_utf8_lossy(&tree.stderr),
        "web and tree say the same"
    );
    assert_eq!(web.status.code(), tree.status.code());
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// 4: the token is kept beside the database (mode 0600), so a restarted `web` takes the same
/// one: an open page reconnects by itself, with no reload, and shows rows written while the
/// server was away. Started with another token, the page says the token changed and how to
/// get the new address.
#[test]
fn an_open_page_reconnects_after_a_restart_and_says_when_the_token_changed() {
    use std::os::unix::fs::PermissionsExt;
    if !browser::available(
        "an_open_page_reconnects_after_a_restart_and_says_when_the_token_changed",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("page.sqlite");
    two_live(&db);
    let web = Web::start_with(&db, &["--port", "0"]);
    let port = web.port.to_string();
    let kept = dir.path().join("page.sqlite.web-token");
    assert_eq!(std::fs::read_to_string(&kept).unwrap().trim(), web.token);
    assert_eq!(
        std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let b = Browser::start();
    b.goto(&web.url());
    b.wait_for(
        "live",
        "return document.getElementById('status').textContent === 'live'",
        Duration::from_secs(10),
    );
    b.eval("window.tbMarker = 'same page'; return true;");
    let first = web.token.clone();
    drop(web);
    b.wait_for(
        "the page sees the server gone",
        "return document.getElementById('status').textContent !== 'live'",
        Duration::from_secs(10),
    );
    // A row written while the server is away.
    {
        let store = Store::open(&db).unwrap();
        let m = common::manager(&store, "ses_page");
        common::add(
            &store,
            &[common::thread(
                &common::tid(3),
                m,
                "/root/while_away",
                false,
            )],
        );
    }
    let again = Web::start_with(&db, &["--port", &port]);
    assert_eq!(again.token, first, "the kept token");
    b.wait_for(
        "reconnected",
        "return document.getElementById('status').textContent === 'live'",
        Duration::from_secs(15),
    );
    b.wait_for(
        "the row written meanwhile",
        "return document.querySelector('.row.thread[data-path=\"/root/while_away\"]') !== null",
        Duration::from_secs(10),
    );
    assert_eq!(
        b.eval("return window.tbMarker"),
        json!("same page"),
        "no reload"
    );
    drop(again);
    // Another token: the page says so instead of reconnecting forever.
    let other = Web::start_with(
        &db,
        &["--port", &port, "--token", "another-token-0123456789"],
    );
    b.wait_for(
        "the token notice",
        "return !document.getElementById('token-changed').hidden",
        Duration::from_secs(15),
    );
    let said = text(
        &b,
        "return document.getElementById('token-changed').innerText",
    );
    assert!(
        said.contains("another token") && said.contains("?token="),
        "{said}"
    );
    assert_eq!(
        text(&b, "return document.getElementById('status').textContent"),
        "token changed"
    );
    assert_eq!(b.eval("return window.tbMarker"), json!("same page"));
    drop(other);
}

/// 1 and 2: each row shows its task (its name, else its prompt's first line); a child that asks
/// (`THREADBASE_UI=parent`) appears in the "needs you" band at the top with its one action, and
/// the title carries the count; answered from the band, it leaves the band and the title.
/// The detail shows the whole prompt and every message sent since, with who sent it and when
/// (the `thread` tool's send and the page's own).
#[test]
fn the_band_lists_a_child_that_asks_until_answered_and_the_detail_shows_its_task() {
    use crate::support::serve_client::Scripted;
    if !browser::available(
        "the_band_lists_a_child_that_asks_until_answered_and_the_detail_shows_its_task",
    ) {
        return;
    }
    let place = Scripted::new("web_band");
    place.script(
        "script",
        &json!({"turns": [
            {"steps": [
                {"ui": "confirm", "title": "Deploy?", "message": "Ship build 42 to staging"},
                {"text": "got: {ui}"}
            ]},
            {"steps": [{"text": "tidied"}]},
            {"steps": [{"text": "noted"}]}
        ]})
        .to_string(),
    );
    let mut serve = place.serve(
        "script",
        vec!["--session-id".into(), "ses_web_band".into()],
        &[("THREADBASE_UI", "parent")],
    );
    let r: Value = serve.thread(json!({
        "action": "start",
        "prompt": "Deploy build 42 to staging\nthen report what changed.",
        "taskName": "deploy"
    }));
    assert_eq!(r["details"]["kind"], "started", "{r}");
    let web = Web::start(&place.db, TOKEN);
    let b = Browser::start();
    b.goto(&web.url());
    b.wait_for(
        "the band",
        "const n = document.querySelector('.need[data-path=\"/root/deploy\"]'); return n && !document.getElementById('needs').hidden && n.dataset.attention === 'asking'",
        Duration::from_secs(20),
    );
    assert_eq!(text(&b, "return document.title"), "(1) threadbase");
    let band = text(&b, "return document.getElementById('needs').innerText");
    assert!(
        band.contains("asking") && band.contains("Deploy?") && band.contains("Answer"),
        "{band}"
    );
    // The row's task: its prompt's first line (its name is its task name).
    b.wait_for(
        "the task in the row",
        "const r = document.querySelector('.row.thread[data-path=\"/root/deploy\"] .c-task'); return r && r.textContent === 'Deploy build 42 to staging'",
        Duration::from_secs(10),
    );
    b.screenshot(&browser::screenshot_dir().join("needs-band.png"));
    // The band's one action opens the question; answered, the thread leaves the band.
    b.click(".need[data-path=\"/root/deploy\"] button");
    b.wait_for(
        "the question",
        "return document.getElementById('question') !== null",
        Duration::from_secs(10),
    );
    b.click("#answer-yes");
    b.wait_for(
        "the band to empty",
        "return document.getElementById('needs').hidden && document.title === 'threadbase'",
        Duration::from_secs(20),
    );
    let done = serve.thread(json!({"action": "wait", "id": "/root/deploy", "timeoutMs": 20000}));
    assert!(
        done["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("got: true"),
        "{done}"
    );
    // A follow-up from the `thread` tool, then one from the page.
    let sent = serve.thread(
        json!({"action": "send", "id": "/root/deploy", "message": "Also tidy the staging logs."}),
    );
    assert_eq!(sent["details"]["accepted"], json!(true), "{sent}");
    serve.thread(json!({"action": "wait", "id": "/root/deploy", "timeoutMs": 20000}));
    b.click("#act-send");
    b.eval(
        "document.getElementById('send-message').value = 'Note the build number.'; return true;",
    );
    b.click("#send-go");
    b.wait_for(
        "both follow-ups in the detail",
        "const s = document.getElementById('sent'); return s && s.querySelectorAll('.sent').length === 2",
        Duration::from_secs(20),
    );
    let prompt = text(&b, "return document.getElementById('prompt').textContent");
    assert_eq!(
        prompt,
        "Deploy build 42 to staging\nthen report what changed."
    );
    let sent = text(&b, "return document.getElementById('sent').innerText");
    assert!(
        sent.contains("Also tidy the staging logs.")
            && sent.contains("session ses_web_band (thread tool)"),
        "{sent}"
    );
    assert!(
        sent.contains("Note the build number.") && sent.contains("the web page"),
        "{sent}"
    );
    let first = sent.find("Also tidy").unwrap();
    assert!(
        first < sent.find("Note the build").unwrap(),
        "oldest first: {sent}"
    );
    b.screenshot(&browser::screenshot_dir().join("task-detail.png"));
    drop(b);
    drop(web);
    serve.close(Duration::from_secs(10));
}

/// 1: the row's task is its name when it says more than its task name, else its prompt's first
/// line; through `/api/rows` and on the page.
#[test]
fn rows_carry_the_task_name_else_the_prompts_first_line() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("page.sqlite");
    let store = Store::open(&db).unwrap();
    let m = common::manager(&store, "ses_task");
    let mut a = common::thread(&common::tid(1), m, "/root/q1", false);
    a.prompt = Some("\n  Find every caller of parse_args\nand list them.".into());
    let mut named = common::thread(&common::tid(2), m, "/root/helper3", false);
    named.name = "Check the examples".into();
    named.prompt = Some("Run cargo test --examples".into());
    let bare = common::thread(&common::tid(3), m, "/root/bare", false);
    common::add(&store, &[a, named, bare]);
    drop(store);
    let web = Web::start(&db, TOKEN);
    let (status, page) = web.get("/api/rows?root=ses_task&offset=0&limit=10");
    assert_eq!(status, 200, "{page}");
    let tasks: Vec<(String, String)> = page["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().into(),
                r["task"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        tasks,
        [
            ("/root/bare".to_string(), "bare".to_string()),
            (
                "/root/helper3".to_string(),
                "Check the examples".to_string()
            ),
            (
                "/root/q1".to_string(),
                "Find every caller of parse_args".to_string()
            ),
        ]
    );
    let (_, detail) = web.get(&format!("/api/thread?id={}", common::tid(1)));
    assert_eq!(
        detail["prompt"],
        "\n  Find every caller of parse_args\nand list them."
    );
    assert_eq!(detail["sent"], json!([]));
}

/// 3: the timeline of a tree: a bar per thread, nested by path, that changes colour when the
/// thread changes state (busy while its turn runs, idle after), live like the table; a click on
/// a bar opens its detail.
#[test]
fn the_timeline_draws_a_bar_per_thread_that_changes_colour_with_its_state() {
    use crate::support::serve_client::Scripted;
    if !browser::available("the_timeline_draws_a_bar_per_thread_that_changes_colour_with_its_state")
    {
        return;
    }
    let place = Scripted::new("web_timeline");
    place.script(
        "script",
        r#"{"turns":[{"steps":[{"delay_ms":6000},{"text":"done"}]}]}"#,
    );
    let mut serve = place.serve(
        "script",
        vec!["--session-id".into(), "ses_web_timeline".into()],
        &[],
    );
    for task in ["lint", "build"] {
        let r: Value = serve.thread(
            json!({"action": "start", "prompt": format!("{task} the crate"), "taskName": task}),
        );
        assert_eq!(r["details"]["kind"], "started", "{r}");
    }
    let web = Web::start(&place.db, TOKEN);
    let b = Browser::start();
    b.goto(&web.url());
    b.wait_for(
        "the rows",
        "return document.querySelectorAll('.row.thread').length >= 2",
        Duration::from_secs(10),
    );
    b.click("#timeline-toggle");
    b.wait_for(
        "a bar per thread",
        "return document.querySelectorAll('#timeline-plot g.bar').length === 2",
        Duration::from_secs(10),
    );
    b.wait_for(
        "lint busy",
        "const g = document.querySelector('#timeline-plot g.bar[data-path=\"/root/lint\"]'); return g && g.dataset.kind === 'busy'",
        Duration::from_secs(10),
    );
    let ticks = b.eval("return document.querySelectorAll('#timeline-plot g.bar[data-path=\"/root/lint\"] .tick').length");
    assert_eq!(ticks, json!(1), "one turn, one tick");
    let tip = text(&b, "return document.querySelector('#timeline-plot g.bar[data-path=\"/root/lint\"] title').textContent");
    assert!(
        tip.contains("/root/lint") && tip.contains("lint the crate"),
        "{tip}"
    );
    // The turn ends: the bar turns idle with no reload.
    b.wait_for(
        "lint idle",
        "const g = document.querySelector('#timeline-plot g.bar[data-path=\"/root/lint\"]'); return g && g.dataset.kind === 'idle'",
        Duration::from_secs(20),
    );
    b.wait_for(
        "build idle",
        "const g = document.querySelector('#timeline-plot g.bar[data-path=\"/root/build\"]'); return g && g.dataset.kind === 'idle'",
        Duration::from_secs(20),
    );
    let kinds = b.eval("return [...document.querySelectorAll('#timeline-plot g.bar[data-path=\"/root/lint\"] rect.seg')].map(r => r.dataset.kind)");
    assert!(
        kinds.as_array().unwrap().iter().any(|k| k == "busy"),
        "{kinds}"
    );
    // A click on a bar opens the thread.
    // Its label: a bar's first segment can be a 1-pixel span (its instant in the queue).
    b.click("#timeline-plot g.bar[data-path=\"/root/build\"] text");
    b.wait_for(
        "build's detail",
        "const h = document.getElementById('detail-path'); return h && h.textContent === '/root/build'",
        Duration::from_secs(10),
    );
    drop(b);
    drop(web);
    serve.close(Duration::from_secs(10));
}

/// The README's pictures: the page on the demo's database (its "needs you" band, the rows'
/// tasks, a thread's detail) and the demo tree's timeline, saved in `docs/img/` with
/// THREADBASE_UPDATE_SCREENSHOTS=1 (else in `target/web-screenshots/`).
#[test]
fn screenshots_of_the_demo_page_and_its_timeline_for_the_docs() {
    if !browser::available("screenshots_of_the_demo_page_and_its_timeline_for_the_docs") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.sqlite");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .args(["demo", "--keep"])
        .arg(&db)
        .env_remove("THREADBASE_DB")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let web = Web::start(&db, TOKEN);
    let b = Browser::start();
    b.eval("return true");
    b.goto(&web.url());
    open_row(&b, "/root/api_survey");
    b.wait_for(
        "api_survey's task",
        "const p = document.getElementById('prompt'); return p && p.textContent.length > 10",
        Duration::from_secs(10),
    );
    let task = text(&b, "return document.querySelector('.row.thread[data-path=\"/root/api_survey\"] .c-task').textContent");
    assert!(!task.is_empty() && task != "api_survey", "{task}");
    // The README's copies are rewritten only when asked (THREADBASE_UPDATE_SCREENSHOTS=1), so
    // a test run leaves the work tree as it was; otherwise they go beside the others.
    let docs = match std::env::var_os("THREADBASE_UPDATE_SCREENSHOTS") {
        Some(_) => Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/img"),
        None => browser::screenshot_dir(),
    };
    b.screenshot(&docs.join("web.png"));
    b.click("#timeline-toggle");
    b.wait_for(
        "the demo's timeline",
        "return document.querySelectorAll('#timeline-plot g.bar').length >= 4 && document.getElementById('timeline-cost') !== null",
        Duration::from_secs(10),
    );
    let bars = b
        .eval("return document.querySelectorAll('#timeline-plot g.bar').length")
        .as_i64()
        .unwrap();
    let threads = common::count(&db, "SELECT count(*) FROM threads");
    assert_eq!(bars, threads, "a bar per thread");
    b.screenshot(&docs.join("timeline.png"));
}

/// The page stays fast at 10k threads: the first paint, the band and the timeline (its first
/// 1000 threads), and a change (a new live thread) on the page; measured and printed, not
/// asserted as times.
#[test]
fn ten_thousand_threads_paint_and_a_change_shows_measured() {
    if !browser::available("ten_thousand_threads_paint_and_a_change_shows_measured") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("big.sqlite");
    crate::web::seed_forest(&db, 10_000);
    let web = Web::start(&db, TOKEN);
    let b = Browser::start();
    b.goto(&web.url());
    b.wait_for(
        "the first page",
        "return window.tb && window.tb.firstPaint",
        Duration::from_secs(20),
    );
    b.goto(&format!("http://127.0.0.1:{}/", web.port));
    let painted = b
        .wait_for(
            "the first paint",
            "return window.tb && window.tb.firstPaint",
            Duration::from_secs(20),
        )
        .as_f64()
        .unwrap();
    assert!(
        b.eval("return document.querySelectorAll('.row.thread').length")
            .as_i64()
            .unwrap()
            > 10
    );
    b.click("#timeline-toggle");
    b.wait_for(
        "the timeline",
        "return document.querySelectorAll('#timeline-plot g.bar').length === 1000",
        Duration::from_secs(30),
    );
    let drawn_ms = b.eval("return window.tb.timelineMs").as_f64().unwrap();
    // A change: a live child of /root/a0, shown in the rows (tree order puts it near the top).
    let written = {
        let store = Store::open(&db).unwrap();
        let m = common::manager(&store, "ses_big");
        common::add(
            &store,
            &[common::thread(
                "thread_zz0000000001",
                m,
                "/root/a0/a_new",
                true,
            )],
        );
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
            * 1000.0
    };
    let seen = b
        .wait_for(
            "the new child",
            "return document.querySelector('.row.thread[data-path=\"/root/a0/a_new\"]') ? performance.timeOrigin + performance.now() : null",
            Duration::from_secs(20),
        )
        .as_f64()
        .unwrap();
    eprintln!(
        "web at 10k threads: first paint {painted:.0} ms; timeline of 1000 bars drawn in {drawn_ms:.0} ms; a new child on the page {:.0} ms after its commit",
        seen - written
    );
}

/// 7: on a database two hosts use, the page offers a host filter, each row names its thread's
/// host, and so does each bar of the timeline; the filter keeps one host's threads.
#[test]
fn a_team_database_has_a_host_filter_and_hosts_on_rows_and_bars() {
    if !browser::available("a_team_database_has_a_host_filter_and_hosts_on_rows_and_bars") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("team.sqlite");
    let store = Store::open(&db).unwrap();
    let m = common::manager(&store, "ses_team");
    common::add(
        &store,
        &[
            common::thread(&common::tid(1), m, "/root/on_alpha", true),
            common::thread(&common::tid(2), m, "/root/on_beta", true),
        ],
    );
    drop(store);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let me = threadbase::runtime::signals::ProcessIdentity::current();
    conn.execute(
        "UPDATE threads SET owner_pid = ?1, owner_started_at = ?2 + 1, boot_id = 'b',
           host_id = CASE path WHEN '/root/on_alpha' THEN 'alpha' ELSE 'beta' END",
        rusqlite::params![me.pid, me.started_at],
    )
    .unwrap();
    conn.execute_batch(
        "INSERT INTO host_serves (host_id, boot_id, pid, started_at, first_at, heartbeat_at) VALUES ('alpha', 'b', 7, 7, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
         INSERT INTO host_serves (host_id, boot_id, pid, started_at, first_at, heartbeat_at) VALUES ('beta', 'b', 8, 8, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));",
    )
    .unwrap();
    drop(conn);
    let web = Web::start(&db, TOKEN);
    let b = Browser::start();
    b.goto(&web.url());
    b.wait_for(
        "both rows",
        "return document.querySelectorAll('.row.thread').length === 2",
        Duration::from_secs(10),
    );
    let hosts = b.eval("const s = document.getElementById('f-host'); return s.hidden ? null : [...s.options].map(o => o.value)");
    assert_eq!(hosts, json!(["", "alpha", "beta"]));
    let row = text(&b, "return document.querySelector('.row.thread[data-path=\"/root/on_beta\"] .c-state').textContent");
    assert!(row.ends_with(" · beta"), "{row}");
    b.click("#timeline-toggle");
    b.wait_for(
        "the bars",
        "return document.querySelectorAll('#timeline-plot g.bar').length === 2",
        Duration::from_secs(10),
    );
    let label = text(&b, "return document.querySelector('#timeline-plot g.bar[data-path=\"/root/on_alpha\"] text').textContent");
    assert!(
        label.contains("alpha") && label.ends_with(" · alpha"),
        "{label}"
    );
    b.eval("const s = document.getElementById('f-host'); s.value = 'beta'; s.dispatchEvent(new Event('change')); return true;");
    b.wait_for(
        "beta's thread only",
        "const r = [...document.querySelectorAll('.row.thread')].map(e => e.dataset.path); return r.length === 1 && r[0] === '/root/on_beta'",
        Duration::from_secs(10),
    );
    let (status, page) = web.get("/api/rows?root=ses_team&host=alpha");
    assert_eq!(status, 200, "{page}");
    let paths: Vec<&str> = page["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["/root/on_alpha"]);
}

/// Issue 48: an isolated thread's detail shows its worktree and what it changed, and Merge
/// (behind its confirmation) is a command row the serve of its session carries out: the main
/// tree gets the change.
#[test]
fn an_isolated_threads_detail_shows_its_diff_and_merges_it() {
    if !browser::available("an_isolated_threads_detail_shows_its_diff_and_merges_it") {
        return;
    }
    let place = crate::support::serve_client::Scripted::new("web_worktree");
    place.script(
        "script",
        r#"{"turns": [[{"write": {"path": "notes.txt", "content": "changed by the child\n"}}, {"text": "wrote it"}]]}"#,
    );
    let git = |args: &[&str]| common::git(&place.root, args);
    git(&["init", "--quiet", "-b", "main"]);
    std::fs::write(place.root.join("notes.txt"), "base\n").unwrap();
    // The test's own files (database, scripts) stay out of the repository.
    std::fs::write(
        place.root.join(".gitignore"),
        "*.json\ndb.sqlite*\nagent/\n*.web-token\n",
    )
    .unwrap();
    git(&["add", "notes.txt", ".gitignore"]);
    git(&["commit", "--quiet", "-m", "init"]);
    let mut serve = place.serve(
        "script",
        vec!["--session-id".into(), "ses_web_worktree".into()],
        &[("THREADBASE_ISOLATION", "worktree")],
    );
    let r =
        serve.thread(json!({"action": "start", "prompt": "edit the notes", "taskName": "editor"}));
    assert_eq!(r["details"]["kind"], "started", "{r}");
    let w = serve.thread(json!({"action": "wait", "id": "editor", "timeoutMs": 20000}));
    assert_eq!(w["details"]["snapshot"]["phase"], "idle", "{w}");
    let web = Web::start(&place.db, TOKEN);
    let b = Browser::start();
    b.goto(&web.url());
    open_row(&b, "/root/editor");
    b.wait_for(
        "the worktree's diff",
        "const d = document.getElementById('worktree-diff'); return d && d.textContent.includes('+changed by the child')",
        Duration::from_secs(10),
    );
    let branch = text(
        &b,
        "return document.getElementById('worktree-path').textContent",
    );
    assert!(branch.contains("threadbase/editor-"), "{branch}");
    assert_eq!(
        std::fs::read_to_string(place.root.join("notes.txt")).unwrap(),
        "base\n"
    );
    b.click("#act-merge");
    b.wait_for(
        "the confirmation",
        "return !document.getElementById('confirm').hidden",
        Duration::from_secs(5),
    );
    b.click("#confirm-yes");
    b.wait_for(
        "the merge carried out",
        "const r = document.getElementById('action-result'); return r && r.textContent.startsWith('merge: done')",
        Duration::from_secs(20),
    );
    assert_eq!(
        std::fs::read_to_string(place.root.join("notes.txt")).unwrap(),
        "changed by the child\n"
    );
    assert!(git(&["log", "--oneline"]).lines().count() >= 2);
    serve.close(Duration::from_secs(20));
}

/// 2: a thread that ended failed (and is not archived) is in the "needs you" band, read from
/// its partial index (V19), and leaves it once archived.
#[test]
fn the_band_lists_a_thread_that_ended_failed_until_it_is_archived() {
    let place = crate::support::serve_client::Scripted::new("web_band_failed");
    place.script(
        "script",
        r#"{"turns": [{"steps": [{"text": "bye"}, {"exit": 3}]}]}"#,
    );
    let mut serve = place.serve(
        "script",
        vec!["--session-id".into(), "ses_web_band_failed".into()],
        &[],
    );
    let r = serve.thread(json!({"action": "start", "prompt": "crash", "taskName": "crasher"}));
    let id = r["details"]["snapshot"]["id"].as_str().unwrap().to_string();
    let web = Web::start(&place.db, TOKEN);
    let needs = |web: &Web| -> Vec<Value> {
        let (status, trees) = web.get("/api/trees");
        assert_eq!(status, 200, "{trees}");
        trees["needs"].as_array().cloned().unwrap_or_default()
    };
    common::poll(
        Duration::from_secs(20),
        Duration::from_millis(50),
        "the failed thread in the band",
        || {
            needs(&web)
                .into_iter()
                .find(|n| n["id"] == id.as_str() && n["attention"] == "failed")
        },
    );
    let r = serve.thread(json!({"action": "archive", "id": id}));
    assert!(r.get("error").is_none(), "{r}");
    common::poll(
        Duration::from_secs(20),
        Duration::from_millis(50),
        "the archived thread leaves the band",
        || {
            needs(&web)
                .iter()
                .all(|n| n["id"] != id.as_str())
                .then_some(())
        },
    );
    serve.close(Duration::from_secs(20));
}
