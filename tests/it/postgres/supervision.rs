//! Supervision never silently stops (issue 46), against a real server. A serve runs as a role
//! of its own with a small `CONNECTION LIMIT`, so the test decides how many connections it can
//! get: one whose row watcher cannot get its connection at start says so before every answer
//! (a `supervision` notification with a `Repair:`), `host list` shows it `DEGRADED`, a
//! `threadbase stop` from another host waits and a notice stays undelivered; once the test
//! frees a connection the watcher, retrying with its backoff, takes it, the heartbeat row
//! clears the mark, the stop is carried out and the notice delivered. And a serve at rest holds
//! at most 3 connections (its role's rows in `pg_stat_activity`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{json, Value};
use tokio_postgres::Client;

use crate::support::postgres::{connect, TestSchema};
use crate::support::serve_client::{scripted_command, Serve, ServeSpec};

/// A login role of the test's own (not a superuser, whose connections no limit counts) that
/// may create threadbase's tables in the schema; dropped with what it owns on drop.
struct Role<'a> {
    name: String,
    schema: &'a TestSchema,
}

impl<'a> Role<'a> {
    fn new(schema: &'a TestSchema, limit: i32) -> Role<'a> {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "tb_role_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let sql = format!(
            "CREATE ROLE {name} LOGIN NOSUPERUSER CONNECTION LIMIT {limit}; GRANT ALL ON SCHEMA {s} TO {name};",
            s = schema.name
        );
        schema
            .block_on(schema.client.batch_execute(&sql))
            .unwrap_or_else(|e| panic!("create role {name}: {e}"));
        Role { name, schema }
    }

    /// The schema's URL with this role as its user.
    fn url(&self) -> String {
        let url = self.schema.database_url();
        let (scheme, rest) = url.split_once("://").expect("a URL");
        let rest = rest.split_once('@').map_or(rest, |(_, host)| host);
        format!("{scheme}://{}@{rest}", self.name)
    }

    /// A connection of this role (it counts against the limit while it is held).
    fn hold(&self) -> Client {
        self.schema.block_on(connect(&self.url()))
    }

    /// This role's connections to the server now.
    fn connections(&self) -> i64 {
        self.schema
            .block_on(self.schema.client.query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE usename = $1",
                &[&self.name],
            ))
            .unwrap()
            .get(0)
    }
}

impl Drop for Role<'_> {
    fn drop(&mut self) {
        let name = &self.name;
        let sql = format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{name}'; DROP OWNED BY {name} CASCADE; DROP ROLE {name};"
        );
        if let Err(e) = self.schema.block_on(self.schema.client.batch_execute(&sql)) {
            eprintln!("could not drop the test role {name}: {e}");
        }
    }
}

fn serve(db: &Path, root: &Path, script: &Path, host: &str) -> Serve {
    Serve::start(ServeSpec {
        db,
        args: vec![
            "--cwd".into(),
            root.display().to_string(),
            "--session-id".into(),
            "ses_supervision".into(),
        ],
        env: vec![
            ("THREADBASE_PI_COMMAND".into(), scripted_command(script)),
            ("THREADBASE_HOST_ID".into(), host.into()),
        ],
        cwd: root.to_path_buf(),
        clear_env: false,
    })
}

/// `threadbase ARGS` on host `host` against `db` (the test's own, unlimited role): exit code
/// and stdout.
fn cli(db: &str, host: &str, args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env("THREADBASE_HOST_ID", host)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// The `supervision` notification that preceded the answer to request `id`, if any.
fn note_of(s: &Serve, id: u64) -> Option<Value> {
    s.notifications()
        .into_iter()
        .find(|n| n["method"] == "supervision" && n["params"]["requestId"] == id)
        .map(|n| n["params"].clone())
}

/// A `thread` request; its result and the note that preceded it.
fn ask(s: &mut Serve, params: Value) -> (Value, Option<Value>) {
    let id = s.send("thread", params.clone());
    let r = s.response(id, Duration::from_secs(60));
    assert!(r.get("error").is_none(), "thread {params} failed: {r}");
    (r["result"].clone(), note_of(s, id))
}

fn until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    crate::support::common::poll(
        Duration::from_secs(secs),
        Duration::from_millis(100),
        what,
        || done().then_some(()),
    )
}

fn scalar<T: for<'r> tokio_postgres::types::FromSql<'r>>(schema: &TestSchema, sql: &str) -> T {
    schema
        .block_on(schema.client.query_one(sql, &[]))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

fn script(root: &Path) -> PathBuf {
    let path = root.join("script.json");
    std::fs::write(&path, json!({"default_reply": "done"}).to_string()).unwrap();
    path
}

#[test]
fn a_serve_without_its_watchers_connection_says_so_and_catches_up_once_it_has_one() {
    let Some(schema) = TestSchema::new("supervision_degraded") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = dunce::canonicalize(tmp.path()).unwrap();
    let script = script(&root);
    // Three connections for the role; the test holds one, so the serve gets its writer and the
    // reader its start and its once-a-second checks use, and its row watcher gets none.
    let role = Role::new(&schema, 3);
    let held = role.hold();
    let db = PathBuf::from(role.url());
    let admin = schema.database_url();
    let mut s = serve(&db, &root, &script, "host-a");
    let pid = s.child.id() as i64;

    // Every answer says supervision is not running, why, and how to repair it.
    let mut note = None;
    until("a note that supervision is not running", 60, || {
        note = ask(&mut s, json!({"action": "list"})).1;
        note.is_some()
    });
    let note = note.unwrap();
    let text = note["text"].as_str().unwrap();
    assert_eq!(note["running"], false, "{note}");
    assert_eq!(note["parts"], json!(["watcher"]), "{note}");
    assert!(
        text.contains("supervision is not running")
            && text.contains("row watcher holds no database connection")
            && text.contains("Repair:"),
        "{text}"
    );
    assert!(
        note["reason"]
            .as_str()
            .unwrap()
            .contains("too many connections"),
        "{note}"
    );
    // A thread starts all the same (the writer and the reader work); its answer says it too.
    let (started, start_note) = ask(
        &mut s,
        json!({"action": "start", "prompt": "go", "taskName": "a"}),
    );
    assert!(start_note.is_some(), "{started}");
    until("the child's first turn ended", 60, || {
        scalar::<i64>(
            &schema,
            "SELECT count(*) FROM threads WHERE path = '/root/a' AND status = 'live' AND phase = 'idle'",
        ) == 1
    });

    // host list (another host, its own connections) shows the serve degraded, from its row.
    until("host list shows the serve degraded", 30, || {
        cli(&admin, "host-b", &["host", "list"])
            .1
            .contains(&format!("DEGRADED serve pid {pid} since"))
    });
    let (code, listed) = cli(&admin, "host-b", &["host", "list", "--json"]);
    assert_eq!(code, 0, "{listed}");
    let hosts: Value = serde_json::from_str(&listed).unwrap();
    let a = hosts["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["hostId"] == "host-a")
        .unwrap_or_else(|| panic!("{hosts}"));
    assert_eq!(a["degradedServes"][0]["pid"], pid, "{hosts}");
    assert_eq!(a["up"], true, "the writer keeps its lease: {hosts}");

    // A stop from another host is a command row nobody carries out yet; the child's notice
    // waits in the database.
    let (code, stopped) = cli(&admin, "host-b", &["stop", "/root/a", "--timeout", "1"]);
    assert_eq!(code, 1, "{stopped}");
    assert!(stopped.contains("stays queued"), "{stopped}");
    assert_eq!(
        scalar::<i64>(
            &schema,
            "SELECT count(*) FROM commands WHERE state = 'pending'"
        ),
        1
    );
    assert!(
        scalar::<i64>(
            &schema,
            "SELECT count(*) FROM mailbox WHERE kind = 'notice'"
        ) >= 1,
        "the turn's notice is written"
    );
    assert!(s.notices().is_empty(), "{:?}", s.notices());
    let beat_before: String = scalar(
        &schema,
        &format!("SELECT heartbeat_at FROM host_serves WHERE pid = {pid}"),
    );

    // A connection frees: the watcher's next attempt takes it and everything that waited runs.
    drop(held);
    until("the stop from host-b carried out", 90, || {
        scalar::<i64>(
            &schema,
            "SELECT count(*) FROM threads WHERE path = '/root/a' AND status = 'closed' AND exit_kind = 'stopped'",
        ) == 1
    });
    until("the stop's outcome recorded", 30, || {
        scalar::<String>(&schema, "SELECT state FROM commands") == "done"
    });
    until("the notice delivered", 30, || {
        s.notices().iter().any(|n| n["params"]["path"] == "/root/a")
    });
    until("a heartbeat without the mark", 30, || {
        scalar::<i64>(
            &schema,
            &format!(
                "SELECT count(*) FROM host_serves WHERE pid = {pid} AND degraded_since IS NULL AND heartbeat_at > '{beat_before}'"
            ),
        ) == 1
    });
    // Answers carry no note any more.
    let (_, after) = ask(&mut s, json!({"action": "list"}));
    assert!(after.is_none(), "{after:?}");
    let (_, listed) = cli(&admin, "host-b", &["host", "list"]);
    assert!(!listed.contains("DEGRADED"), "{listed}");
    s.close(Duration::from_secs(20));
    drop(role);
}

#[test]
fn a_serve_at_rest_holds_at_most_three_connections() {
    let Some(schema) = TestSchema::new("supervision_at_rest") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = dunce::canonicalize(tmp.path()).unwrap();
    let script = script(&root);
    let role = Role::new(&schema, 20);
    let db = PathBuf::from(role.url());
    let mut s = serve(&db, &root, &script, "host-rest");
    s.thread(json!({"action": "start", "prompt": "go", "taskName": "a"}));
    // A burst of requests at once opens readers beside the one in use.
    let mut busiest = 0;
    for _ in 0..5 {
        let ids: Vec<u64> = (0..16)
            .map(|_| s.send("thread", json!({"action": "list"})))
            .collect();
        busiest = busiest.max(role.connections());
        for id in ids {
            s.response(id, Duration::from_secs(60));
        }
    }
    eprintln!("connections during the burst: up to {busiest}");
    // Readers close after 10 s unused (the pool looks every 30 s): at rest the writer, the row
    // watcher's and the reader the watcher's once-a-second checks use.
    until("at most 3 connections at rest", 120, || {
        role.connections() <= 3
    });
    for _ in 0..10 {
        let n = role.connections();
        assert!(n <= 3, "{n} connections at rest");
        std::thread::sleep(Duration::from_millis(300));
    }
    // And it still answers, opening a reader when it needs one.
    s.thread(json!({"action": "list"}));
    s.close(Duration::from_secs(20));
    drop(role);
}

/// Through the Pi extension as Pi loads it: a degraded serve's note is the tool result's last
/// text block, after the contract's own, so the session sees it.
#[test]
fn the_pi_extension_adds_a_degraded_serves_note_to_the_tool_result() {
    let Some(schema) = TestSchema::new("supervision_extension") else {
        return;
    };
    let node = match crate::support::extension_driver::node() {
        Ok(node) => node,
        Err(why) => {
            crate::support::common::required_or_skip(
                "the_pi_extension_adds_a_degraded_serves_note",
                "Node and Pi",
                &why,
            );
            return;
        }
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = dunce::canonicalize(tmp.path()).unwrap();
    let role = Role::new(&schema, 3);
    let held = role.hold();
    let mut d = crate::support::extension_driver::Driver::start(
        &node,
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("pi-extension/index.ts"),
        &root,
        &[
            (
                "THREADBASE_BIN",
                env!("CARGO_BIN_EXE_threadbase").to_string(),
            ),
            ("THREADBASE_DB", role.url()),
            (
                "PI_CODING_AGENT_DIR",
                root.join("agent").display().to_string(),
            ),
            ("THREADBASE_HOST_ID", "host-ext".to_string()),
        ],
        &crate::support::serve_env::INHERITED,
    );
    d.load(json!({"id": "ext-supervision", "cwd": root}));
    let mut last = Value::Null;
    until("a list whose result ends with the note", 60, || {
        last = d.call("thread", json!({"action": "list"}));
        let content = last["result"]["content"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        content.len() == 2
            && content[1]["text"]
                .as_str()
                .is_some_and(|t| t.contains("supervision is not running") && t.contains("Repair:"))
    });
    // The contract's own text is first and untouched.
    assert!(
        last["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| !t.contains("supervision")),
        "{last}"
    );
    drop(held);
    until(
        "a list without the note once the watcher has its connection",
        60,
        || {
            last = d.call("thread", json!({"action": "list"}));
            last["result"]["content"]
                .as_array()
                .is_some_and(|c| c.len() == 1)
        },
    );
    d.close();
    drop(role);
}

/// The count the answers kept in a serve's memory read (`Store::shared_changes`) is the row
/// watcher's: when the server drops the watcher's connection and the watch reopens it, the
/// reopened one is shared, so answers are kept again (before, the count stayed unreadable
/// until the serve restarted, and every answer was rendered afresh).
#[test]
fn a_change_watch_reopened_after_its_connection_was_lost_is_the_shared_one() {
    let Some(schema) = TestSchema::new("watch_reopen") else {
        return;
    };
    let role = Role::new(&schema, 10);
    let store = threadbase::Store::open(role.url()).unwrap();
    let mut watch = store.change_watch().unwrap();
    let first = watch.version().unwrap();
    assert_eq!(store.shared_changes(), Some(Some(first)));

    let listening = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE usename = '{}' AND query LIKE 'LISTEN%'",
        role.name
    );
    let ended: i64 = scalar(
        &schema,
        &format!(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE usename = '{}' AND query LIKE 'LISTEN%'",
            role.name
        ),
    );
    assert_eq!(ended, 1, "the watch's one listening connection");
    until("the watch sees its connection lost", 10, || {
        store.shared_changes() == Some(None)
    });

    // The next read of the watch reopens it, and the kept answers share it again.
    let reopened = watch.version().unwrap();
    assert_ne!(reopened, first, "a reopened watch's count jumps");
    assert_eq!(store.shared_changes(), Some(Some(reopened)));
    assert_eq!(scalar::<i64>(&schema, &listening), 1);
}
