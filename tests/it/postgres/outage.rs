//! PostgreSQL stopped at once (`pg_ctl stop -m immediate`, as a crash) and started again while
//! a serve's child is mid-turn: the child keeps running, a request made meanwhile gets a clear
//! error soon (no hang), the events the child sent meanwhile are held in memory and written
//! once the server is back, so the thread's event count is the same as in a run without an
//! outage. The test runs its own throwaway cluster (`.ci/postgres start|crash|resume|stop`),
//! so the shared test server is never stopped; it skips (or fails under `CI=true`) without
//! PostgreSQL's programs, as the other PostgreSQL tests do without a server.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::serve_client::{scripted_command, Serve, ServeSpec};
use crate::support::sql;

/// A private cluster in `dir`, stopped and deleted on drop.
struct Cluster {
    dir: PathBuf,
    url: String,
}

fn ci_postgres(args: &[&str]) -> std::process::Output {
    Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/postgres"))
        .args(args)
        .output()
        .expect("run .ci/postgres")
}

impl Cluster {
    fn start(dir: PathBuf) -> Cluster {
        let out = ci_postgres(&["start", dir.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "start a private cluster: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let url = text
            .trim()
            .strip_prefix("export THREADBASE_TEST_PG=")
            .unwrap_or_else(|| panic!("a URL from .ci/postgres: {text}"))
            .to_string();
        Cluster { dir, url }
    }

    fn run(&self, verb: &str) {
        let out = ci_postgres(&[verb, self.dir.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{verb}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn database(&self, schema: &str) -> PathBuf {
        let psql = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "$(dirname $(readlink -f $(command -v pg_ctl || ls /usr/lib/postgresql/*/bin/pg_ctl | head -1)))/psql '{}' -qc 'CREATE SCHEMA {schema}'",
                self.url
            ))
            .output()
            .unwrap();
        assert!(
            psql.status.success(),
            "{}",
            String::from_utf8_lossy(&psql.stderr)
        );
        PathBuf::from(format!("{}?options=-csearch_path%3D{schema}", self.url))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = ci_postgres(&["stop", self.dir.to_str().unwrap()]);
    }
}

/// One turn of 16 tool calls, 250 ms apart (about 4 s), then a closing text.
fn script(root: &Path) -> PathBuf {
    let mut steps = Vec::new();
    for i in 0..16 {
        steps.push(json!({"tool": "bash", "args": {"command": format!("echo {i}")}, "result": format!("{i}\n")}));
        steps.push(json!({"delay_ms": 250}));
    }
    steps.push(json!({"text": "all sixteen done"}));
    let path = root.join("long.json");
    std::fs::write(&path, json!({"turns": [{"steps": steps}]}).to_string()).unwrap();
    path
}

fn serve(db: &Path, root: &Path, script: &Path) -> Serve {
    Serve::start(ServeSpec {
        db,
        args: vec!["--cwd".into(), root.display().to_string()],
        env: vec![("THREADBASE_PI_COMMAND".into(), scripted_command(script))],
        cwd: root.to_path_buf(),
        clear_env: false,
    })
}

/// The thread's events recorded so far (`last_seq` counts every one, trimmed or not).
fn recorded(db: &Path) -> i64 {
    sql::count(db, "SELECT coalesce(max(last_seq), 0) FROM threads")
}

#[test]
fn a_server_outage_mid_turn_loses_no_event_and_a_request_meanwhile_fails_fast() {
    if crate::support::postgres::url_or_skip("postgres_outage").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = dunce::canonicalize(tmp.path()).unwrap();
    let cluster = Cluster::start(root.join("pg"));
    let script = script(&root);

    // The same turn without an outage: how many events it records.
    let quiet = cluster.database("quiet");
    let mut s = serve(&quiet, &root, &script);
    s.thread(json!({"action": "start", "prompt": "go", "taskName": "long"}));
    let done = s.thread(json!({"action": "wait", "id": "long", "timeoutMs": 30000}));
    assert!(
        done["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("all sixteen done"),
        "{done}"
    );
    let expected = recorded(&quiet);
    drop(s);

    let db = cluster.database("outage");
    let mut s = serve(&db, &root, &script);
    s.thread(json!({"action": "start", "prompt": "go", "taskName": "long"}));
    std::thread::sleep(Duration::from_millis(1200));
    let before = recorded(&db);
    cluster.run("crash");
    let down_at = Instant::now();

    // A request while the server is down: an error that says so, soon.
    let asked = Instant::now();
    let id = s.send("thread", json!({"action": "list"}));
    let r = s.response(id, Duration::from_secs(20));
    let answered_in = asked.elapsed();
    let error = r["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        error.contains("PostgreSQL") && error.contains("Repair:"),
        "a request while the server is down fails with the reason: {r}"
    );
    assert!(
        answered_in < Duration::from_secs(5),
        "answered in {answered_in:?}"
    );

    std::thread::sleep(Duration::from_millis(2000).saturating_sub(down_at.elapsed()));
    cluster.run("resume");
    let outage = down_at.elapsed();
    let at_resume = recorded(&db);

    let done = s.thread(json!({"action": "wait", "id": "long", "timeoutMs": 30000}));
    assert!(
        done["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("all sixteen done"),
        "the child ran on through the outage: {done}"
    );
    let after = recorded(&db);
    eprintln!(
        "outage of {outage:?}: {before} events recorded before it, {at_resume} on the server \
         just after the restart, {} held and written after it, {after} in all; {expected} \
         without an outage; the request made meanwhile failed in {answered_in:?}: {error}",
        after - at_resume
    );
    assert!(
        at_resume >= before,
        "every event committed before the outage is there after it: {at_resume} of {before}"
    );
    assert!(
        before > 0 && before < expected,
        "the outage fell mid-turn: {before} of {expected}"
    );
    assert_eq!(after, expected, "every event of the turn was recorded");
    let seqs = sql::count(
        &db,
        "SELECT count(*) FROM thread_events e JOIN threads t ON t.id = e.thread_id \
         WHERE e.seq > t.last_seq - 40",
    );
    assert_eq!(seqs, expected.min(40), "the retained events are whole");
    // The serve lives on and answers as before.
    let listed = s.thread(json!({"action": "list"}));
    assert!(
        listed["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("/root/long"),
        "{listed}"
    );
}
