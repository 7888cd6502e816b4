//! Hosts sharing one database (issue 33): every row that records a process records the host
//! and boot it lives on, and a serve signals, restores and closes only rows of its own host and
//! boot. Two hosts on this machine are two `THREADBASE_HOST_ID`s, so a pid a row of host B
//! records names a real process here too: a host-scoping bug then hits it, in the test.

use crate::support::serve_client::{Scripted, Serve};

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::json;

struct World {
    base: Scripted,
    parent_session: PathBuf,
}

fn world(name: &str) -> World {
    let base = Scripted::new(name);
    let header = json!({"type":"session","version":3,"id":format!("ses_{name}"),"timestamp":"2026-12-05T00:00:00.000Z","cwd":base.root});
    let parent_session = base.session_file("sessions/parent.jsonl", &[header]);
    base.script("script", &json!({"default_reply": "done"}).to_string());
    World {
        base,
        parent_session,
    }
}

impl World {
    /// A serve of the parent session on host `host`.
    fn serve(&self, host: &str) -> Serve {
        let args = vec![
            "--session-file".into(),
            self.parent_session.display().to_string(),
        ];
        self.base
            .serve("script", args, &[("THREADBASE_HOST_ID", host)])
    }

    fn db(&self) -> crate::support::sql::Conn {
        let conn = crate::support::sql::Conn::open(&self.base.db).unwrap();
        conn.busy_timeout(Duration::from_secs(10)).unwrap();
        conn
    }

    /// `(status, exit_kind, pid, host_id, boot_id)` of the thread at `path`.
    fn row(
        &self,
        path: &str,
    ) -> (
        String,
        Option<String>,
        Option<i64>,
        Option<String>,
        Option<String>,
    ) {
        self.db()
            .query_row(
                "SELECT status, exit_kind, pid, host_id, boot_id FROM threads WHERE path = ?1",
                [path],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .unwrap()
    }

    /// Waits until the thread at `path` has a process.
    fn until_launched(&self, path: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.row(path).2.is_none() {
            assert!(Instant::now() < deadline, "launched: {:?}", self.row(path));
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL of `serve`, then a bystander (a group leader of this machine, started after
    /// the thread's process) whose pid, group and start the row of /root/a now names: as far
    /// as this machine can tell, the row's process lives, and a serve that took the row for
    /// its own would kill its group.
    fn kill_serve_and_name_a_bystander(&self, serve: &mut Serve) -> Child {
        serve.child.kill().unwrap();
        serve.child.wait().unwrap();
        let (bystander, started) = bystander(&self.base.marker);
        let pid = bystander.id() as i64;
        self.db()
            .execute(
                &format!(
                    "UPDATE threads SET pid = {pid}, pgid = {pid}, process_started_at = {started} WHERE path = '/root/a'"
                ),
                (),
            )
            .unwrap();
        bystander
    }

    /// Runs `threadbase restore` on host `host`; its stdout.
    fn restore(&self, host: &str) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(&self.base.db)
            .arg("restore")
            .env("THREADBASE_HOST_ID", host)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_string()
}

/// A process leading a group of its own, carrying the test's marker; its start time.
fn bystander(marker: &str) -> (Child, i64) {
    let child = Command::new("sleep")
        .arg("300")
        .env("THREADBASE_TEST_MARKER", marker)
        .process_group(0)
        .spawn()
        .unwrap();
    let started = threadbase::runtime::signals::start_time(child.id() as i64).unwrap();
    (child, started)
}

/// Host `host`'s lease has run out: its last heartbeat moved back to 2026-01-01, as if that long
/// had passed.
fn lease_ran_out(db: &crate::support::sql::Conn, host: &str) {
    db.execute(
        &format!(
            "UPDATE host_serves SET heartbeat_at = '2026-01-01T00:00:00.000Z' WHERE host_id = '{host}'"
        ),
        (),
    )
    .unwrap();
}

fn running(child: &mut Child) -> bool {
    child.try_wait().unwrap().is_none()
}

#[test]
fn a_serve_of_another_host_leaves_a_live_row_and_the_process_its_pid_names_alone() {
    let w = world("hosts_scope");
    // Host B starts a thread; its row records host B and this boot.
    let mut b = w.serve("host-b");
    b.thread(json!({"action": "start", "prompt": "go", "taskName": "a"}));
    w.until_launched("/root/a");
    let (status, _, _, host, boot) = w.row("/root/a");
    assert_eq!(status, "live");
    assert_eq!(host.as_deref(), Some("host-b"));
    assert_eq!(boot, Some(boot_id()));
    // B's serve dies. On host B the thread's process had the pid of what runs here as the
    // bystander, a group leader started after it: as far as this machine can tell, the row's
    // process lives, and a serve that took the row for its own would kill its group.
    let mut bystander = w.kill_serve_and_name_a_bystander(&mut b);

    // A serve and a restore on host A: B's serve is gone on this machine, but nothing here can
    // tell about host B, so both leave its row live and its process running.
    let mut a = w.serve("host-a");
    let listed = a.thread(json!({"action": "list"}));
    assert!(listed.to_string().contains("/root/a"), "{listed}");
    let restored = w.restore("host-a");
    assert!(!restored.contains("/root/a"), "{restored}");
    let (status, exit, ..) = w.row("/root/a");
    assert_eq!((status.as_str(), exit), ("live", None));
    std::thread::sleep(Duration::from_millis(200));
    assert!(running(&mut bystander), "host A signalled host B's pid");
    a.close(Duration::from_secs(20));

    // B's next serve restores B's row: closed as stale, and the recorded group (the pid is
    // this host's now) killed.
    let mut b = w.serve("host-b");
    // Its restore pass runs before it answers.
    b.thread(json!({"action": "list"}));
    let (status, exit, ..) = w.row("/root/a");
    assert_eq!(
        (status.as_str(), exit.as_deref()),
        ("closed", Some("stale"))
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while running(&mut bystander) {
        assert!(
            Instant::now() < deadline,
            "host B killed its own row's group"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    b.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty(), "{:?}", w.base.leftovers());
}

#[test]
fn a_row_of_an_earlier_boot_is_restored_without_signalling_its_pid() {
    let w = world("hosts_boot");
    let mut b = w.serve("host-b");
    b.thread(json!({"action": "start", "prompt": "go", "taskName": "a"}));
    w.until_launched("/root/a");
    // The row as host B's previous boot left it: its pid names a living process of this boot.
    let mut bystander = w.kill_serve_and_name_a_bystander(&mut b);
    w.db()
        .execute(
            "UPDATE threads SET boot_id = 'an-earlier-boot' WHERE path = '/root/a'",
            (),
        )
        .unwrap();
    let mut b = w.serve("host-b");
    // Its restore pass runs before it answers.
    b.thread(json!({"action": "list"}));
    let (status, exit, ..) = w.row("/root/a");
    assert_eq!(
        (status.as_str(), exit.as_deref()),
        ("closed", Some("stale"))
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        running(&mut bystander),
        "a pid of an earlier boot was signalled"
    );
    b.close(Duration::from_secs(20));
    bystander.kill().unwrap();
    bystander.wait().unwrap();
    assert!(w.base.leftovers().is_empty(), "{:?}", w.base.leftovers());
}

#[test]
fn threadbase_stop_from_a_third_host_stops_the_live_threads_of_both_hosts() {
    if !pid_namespaces_or_skip("threadbase_stop_from_a_third_host") {
        return;
    }
    let base = Scripted::new("hosts_stop");
    base.script("script", &json!({"default_reply": "done"}).to_string());
    // Each host's serve is pid 1 of a PID namespace of its own.
    let serve = |session: &str, host: &str| serve_in_own_pid_namespace(&base, session, host);
    let mut a = serve("ses_a", "host-a");
    let mut b = serve("ses_b", "host-b");
    a.thread(json!({"action": "start", "prompt": "go", "taskName": "on_a"}));
    b.thread(json!({"action": "start", "prompt": "go", "taskName": "on_b"}));
    let db = || crate::support::sql::Conn::open(&base.db).unwrap();
    let row = |path: &str| -> (String, Option<String>, Option<String>, bool) {
        db().query_row(
            "SELECT status, exit_kind, host_id, pid IS NOT NULL FROM threads WHERE path = ?1",
            [path],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !(row("/root/on_a").3 && row("/root/on_b").3) {
        assert!(Instant::now() < deadline, "both launched");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(row("/root/on_a").2.as_deref(), Some("host-a"));
    assert_eq!(row("/root/on_b").2.as_deref(), Some("host-b"));

    // A third host holds neither thread: each stop is a command row its holder's serve claims
    // and carries out.
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&base.db)
        .args(["stop", "/root/**"])
        .env("THREADBASE_HOST_ID", "host-c")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("2 of 2 threads closed"), "{text}");
    for path in ["/root/on_a", "/root/on_b"] {
        let (status, exit, ..) = row(path);
        assert_eq!(
            (status.as_str(), exit.as_deref()),
            ("closed", Some("stopped")),
            "{path}"
        );
    }
    a.close(Duration::from_secs(20));
    b.close(Duration::from_secs(20));
    assert!(base.leftovers().is_empty(), "{:?}", base.leftovers());
}

#[test]
fn a_host_id_that_cannot_be_used_stops_a_command_before_it_opens_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("never.sqlite");
    for bad in ["two words", "a/b", &"x".repeat(65)] {
        let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(&db)
            .arg("list")
            .env("THREADBASE_HOST_ID", bad)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        assert!(
            err.starts_with("threadbase: error[") && err.contains("THREADBASE_HOST_ID"),
            "{bad:?}: {err}"
        );
        assert!(
            err.contains("Repair:") && !err.contains("panicked"),
            "{bad:?}: {err}"
        );
        assert!(!db.exists(), "{bad:?}: the database was created");
    }
}

/// `threadbase host …` on host `host`: (exit code, stdout, stderr).
fn host_cli(db: &std::path::Path, host: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(db)
        .arg("host")
        .args(args)
        .env("THREADBASE_HOST_ID", host)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn host_list_shows_each_lease_and_forget_closes_an_unreachable_hosts_threads_signalling_nothing() {
    let w = world("hosts_lease");
    let db = w.base.db.clone();
    let mut b = w.serve("host-b");
    b.thread(json!({"action": "start", "prompt": "go", "taskName": "a"}));
    // B's serve beats at once; seen from host A, host B is up with its one live thread.
    let deadline = Instant::now() + Duration::from_secs(20);
    let hosts = loop {
        let (code, out, err) = host_cli(&db, "host-a", &["list", "--json"]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        if v["hosts"][0]["liveThreads"] == 1 && w.row("/root/a").2.is_some() {
            break v;
        }
        assert!(Instant::now() < deadline, "host B's lease and thread: {v}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let h = &hosts["hosts"][0];
    assert_eq!(h["hostId"], "host-b", "{hosts}");
    assert_eq!(
        (&h["up"], &h["servesUp"]),
        (&json!(true), &json!(1)),
        "{hosts}"
    );
    assert_eq!(h["bootId"], boot_id(), "{hosts}");
    let (_, text, _) = host_cli(&db, "host-b", &["list"]);
    assert!(
        text.contains("host-b") && text.contains(" up (this host)"),
        "{text}"
    );

    // Forgetting a host that is up, or this host, or one nobody knows, is refused.
    let (code, _, err) = host_cli(&db, "host-a", &["forget", "host-b"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is up") && err.contains("Repair:"), "{err}");
    let (code, _, err) = host_cli(&db, "host-b", &["forget", "host-b"]);
    assert!(
        code == 2 && err.contains("this host") && err.contains("threadbase restore"),
        "{err}"
    );
    let (code, _, err) = host_cli(&db, "host-a", &["forget", "host-z"]);
    assert!(
        code == 2 && err.contains("unknown_reference") && err.contains("host list"),
        "{err}"
    );
    assert_eq!(w.row("/root/a").0, "live");

    // B's serve dies and its lease runs out (its last heartbeat moved back by an hour, as if
    // the hour had passed). Its row's pid names a process of this machine, as before.
    let mut bystander = w.kill_serve_and_name_a_bystander(&mut b);
    lease_ran_out(&w.db(), "host-b");
    let (_, text, _) = host_cli(&db, "host-a", &["list"]);
    assert!(
        text.contains("unreachable since 2026-01-01T00:00:00.000Z"),
        "{text}"
    );
    // A's restore still leaves it alone: only a forget, on purpose, closes it.
    w.restore("host-a");
    assert_eq!(w.row("/root/a").0, "live");
    // A stop from host A, by glob or through a serve's `thread` tool, is told at once that the
    // thread's host is unreachable, and writes no command.
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&db)
        .args(["stop", "/root/**"])
        .env("THREADBASE_HOST_ID", "host-a")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("unreachable /root/a")
            && text.contains(
                "held on host host-b, unreachable since 2026-01-01T00:00:00.000Z; nothing was sent"
            )
            && text.contains("0 of 1 thread closed"),
        "{text}"
    );
    let mut a = w.serve("host-a");
    let r = a.thread_error(json!({"action": "stop", "id": "/root/a"}));
    let message = r.to_string();
    assert!(
        message.contains("held on host host-b, unreachable since 2026-01-01T00:00:00.000Z")
            && message.contains("threadbase host forget host-b"),
        "{r}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    a.close(Duration::from_secs(20));
    let commands: i64 = w
        .db()
        .query_row("SELECT count(*) FROM commands", (), |r| r.get(0))
        .unwrap();
    assert_eq!(commands, 0);
    assert_eq!(w.row("/root/a").0, "live");
    let (code, out, err) = host_cli(&db, "host-a", &["forget", "host-b"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("forgot host host-b: closed 1 live thread as stale; nothing was signalled"),
        "{out}"
    );
    let (status, exit, ..) = w.row("/root/a");
    assert_eq!(
        (status.as_str(), exit.as_deref()),
        ("closed", Some("stale"))
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(running(&mut bystander), "forget signalled host B's pid");
    let (_, out, _) = host_cli(&db, "host-a", &["list", "--json"]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&out).unwrap()["hosts"],
        json!([])
    );
    bystander.kill().unwrap();
    bystander.wait().unwrap();
    assert!(w.base.leftovers().is_empty(), "{:?}", w.base.leftovers());
}

/// Whether this machine lets the test start PID namespaces (root, or a user namespace);
/// prints why not, and fails under `CI=true`, where the two-host tests must run.
/// A serve of session `session` on host `host` (the script `script` of `base`), run as pid 1
/// of a PID namespace of its own: two such hosts' pids collide on purpose.
pub(crate) fn serve_in_own_pid_namespace(base: &Scripted, session: &str, host: &str) -> Serve {
    base.serve_under(
        &["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"],
        "script",
        vec!["--session-id".into(), session.into()],
        &[("THREADBASE_HOST_ID", host)],
    )
}

pub(crate) fn pid_namespaces_or_skip(test: &str) -> bool {
    let works = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !works {
        let why = "`unshare --pid --fork --mount-proc` fails here (it needs root)";
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: {why}"
        );
        eprintln!("{test}: skipped: {why}");
    }
    works
}

#[test]
fn two_hosts_in_pid_namespaces_whose_pids_collide_keep_to_their_own_rows() {
    if !pid_namespaces_or_skip("two_hosts_in_pid_namespaces") {
        return;
    }
    let base = Scripted::new("hosts_pidns");
    base.script("script", &json!({"default_reply": "done"}).to_string());
    // Each host's serve is the first process of a PID namespace of its own: both are pid 1.
    let serve = |session: &str, host: &str| serve_in_own_pid_namespace(&base, session, host);
    let db = || crate::support::sql::Conn::open(&base.db).unwrap();
    let row = |path: &str| -> (String, Option<String>, Option<i64>, Option<i64>) {
        db().query_row(
            "SELECT status, exit_kind, pid, owner_pid FROM threads WHERE path = ?1",
            [path],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap()
    };
    let launched = |path: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while row(path).2.is_none() {
            assert!(Instant::now() < deadline, "{path} launched");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let stop_as = |host: &str, pattern: &str| -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(&base.db)
            .args(["stop", pattern])
            .env("THREADBASE_HOST_ID", host)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mut a = serve("ses_a", "host-a");
    let mut b = serve("ses_b", "host-b");
    a.thread(json!({"action": "start", "prompt": "go", "taskName": "on_a"}));
    b.thread(json!({"action": "start", "prompt": "go", "taskName": "on_b"}));
    launched("/root/on_a");
    launched("/root/on_b");
    // The pids collide on purpose: both rows name owner pid 1.
    assert_eq!(row("/root/on_a").3, Some(1));
    assert_eq!(row("/root/on_b").3, Some(1));

    // A stop from a third host reaches B's child through B's serve; A's serve, pid 1 as well,
    // neither claims it nor loses its own thread.
    let text = stop_as("host-c", "/root/on_b");
    assert!(text.contains("1 of 1 thread closed"), "{text}");
    assert_eq!(row("/root/on_b").1.as_deref(), Some("stopped"));
    assert_eq!(row("/root/on_a").0, "live");

    // SIGKILL of B's serve (its namespace goes with it) with a thread live on B.
    b.thread(json!({"action": "start", "prompt": "go", "taskName": "on_b2"}));
    launched("/root/on_b2");
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    // A's serve checks owners every second: B's row, whose owner pid 1 is A's own serve on
    // host A, stays as it is, before the lease runs out and after.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(row("/root/on_b2").0, "live");
    lease_ran_out(&db(), "host-b");
    let (_, hosts, _) = host_cli(&base.db, "host-c", &["list"]);
    assert!(
        hosts.contains("unreachable since 2026-01-01T00:00:00.000Z") && hosts.contains(" up"),
        "{hosts}"
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(row("/root/on_b2").0, "live");
    let text = stop_as("host-c", "/root/on_b2");
    assert!(
        text.contains("held on host host-b, unreachable since"),
        "{text}"
    );
    // A's own thread and child are untouched: A still answers for it, live and idle.
    let polled = a.thread(json!({"action": "poll", "id": "/root/on_a"}));
    assert!(polled.to_string().contains("idle"), "{polled}");
    assert_eq!(row("/root/on_a").0, "live");

    // B's next serve (a new namespace, pid 1 again) restores B's rows only.
    let mut b = serve("ses_b", "host-b");
    b.thread(json!({"action": "list"}));
    let (status, exit, ..) = row("/root/on_b2");
    assert_eq!(
        (status.as_str(), exit.as_deref()),
        ("closed", Some("stale"))
    );
    assert_eq!(row("/root/on_a").0, "live");
    a.close(Duration::from_secs(20));
    b.close(Duration::from_secs(20));
    assert!(base.leftovers().is_empty(), "{:?}", base.leftovers());
}

/// Waits until a serve of `host` has written its heartbeat row.
pub(crate) fn until_host_beats(db: &crate::support::sql::Conn, host: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let rows: i64 = db
            .query_row(
                "SELECT count(*) FROM host_serves WHERE host_id = ?1",
                [host],
                |r| r.get(0),
            )
            .unwrap();
        if rows > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "no heartbeat of {host}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `threadbase ARGS` on host `host`: its stdout (it must succeed).
fn cli(db: &std::path::Path, host: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env("THREADBASE_HOST_ID", host)
        .env_remove("THREADBASE_BUDGET_TOKENS")
        .env_remove("THREADBASE_BUDGET_USD")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// The line of `text` that names `path`.
fn line_of<'a>(text: &'a str, path: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(&format!("{path} ")))
        .unwrap_or_else(|| panic!("no line for {path}: {text}"))
}

#[test]
fn the_team_views_show_each_threads_host_and_an_unreachable_one_since_when() {
    let w = world("hosts_views");
    let db = w.base.db.clone();
    // One tree, two hosts: A's serve and B's serve of the same session each start a thread.
    // B's first: A's serve looks for unreachable hosts once its heartbeat has seen another
    // host's (Store::hosts_to_check), and this test moves B's last heartbeat back rather than
    // wait the 30 s in which A would beat six times.
    let mut b = w.serve("host-b");
    b.thread(json!({"action": "list"}));
    until_host_beats(&w.db(), "host-b");
    let mut a = w.serve("host-a");
    a.thread(json!({"action": "start", "prompt": "go", "taskName": "a"}));
    b.thread(json!({"action": "start", "prompt": "go", "taskName": "b"}));
    w.until_launched("/root/a");
    w.until_launched("/root/b");

    // Seen from host A (or any host): each thread's host.
    let tree = cli(&db, "host-a", &["tree"]);
    assert!(
        line_of(&tree, "/root/a").contains("]  host host-a  "),
        "{tree}"
    );
    assert!(
        line_of(&tree, "/root/b").contains("]  host host-b  "),
        "{tree}"
    );
    let list = cli(&db, "host-a", &["list"]);
    assert!(list.contains(" HOST "), "{list}");
    assert!(line_of(&list, "/root/b").contains("host-b"), "{list}");
    let json: serde_json::Value =
        serde_json::from_str(&cli(&db, "host-a", &["list", "--json"])).unwrap();
    let hosts: Vec<(&str, &str)> = json["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["path"].as_str().unwrap(), t["host"].as_str().unwrap()))
        .collect();
    assert_eq!(hosts, [("/root/a", "host-a"), ("/root/b", "host-b")]);
    for (path, host) in [("/root/a", "host-a"), ("/root/b", "host-b")] {
        let in_forest: String = w
            .db()
            .query_row(
                "SELECT host_id FROM thread_forest WHERE path = ?1",
                [path],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(in_forest, host, "{path}");
    }

    // A list while both are up: A's serve keeps the idle threads' answers (its snapshot cache).
    let listed = a.thread(json!({"action": "list"}));
    assert!(!listed.to_string().contains("unreachable"), "{listed}");
    std::thread::sleep(Duration::from_millis(300));

    // B's serve dies. Its pid is dead on this machine, but it was host B's: host A's views do
    // not call the thread "owner gone" (they did before: one machine's pid check).
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    let tree = cli(&db, "host-a", &["tree"]);
    assert!(!line_of(&tree, "/root/b").contains("owner gone"), "{tree}");
    // Its lease runs out: every view says since when.
    lease_ran_out(&w.db(), "host-b");
    let since = "live/host unreachable since 2026-01-01 00:00:00";
    let tree = cli(&db, "host-a", &["tree"]);
    assert!(
        line_of(&tree, "/root/b").contains(&format!("[{since}]  host host-b")),
        "{tree}"
    );
    assert!(line_of(&tree, "/root/a").contains("[live/"), "{tree}");
    let list = cli(&db, "host-a", &["list"]);
    assert!(line_of(&list, "/root/b").contains(since), "{list}");
    let json: serde_json::Value =
        serde_json::from_str(&cli(&db, "host-a", &["list", "--json"])).unwrap();
    let b_row = json["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["path"] == "/root/b")
        .unwrap()
        .clone();
    assert_eq!(b_row["hostUnreachableSince"], "2026-01-01T00:00:00.000Z");
    let usage = cli(&db, "host-a", &["usage"]);
    assert!(
        usage.contains(" HOST ") && line_of(&usage, "/root/b").contains(since),
        "{usage}"
    );
    let shown = cli(&db, "host-a", &["show", "/root/b"]);
    assert!(
        shown.contains("host-b, unreachable since 2026-01-01T00:00:00.000Z (Repair:"),
        "{shown}"
    );
    let shown: serde_json::Value =
        serde_json::from_str(&cli(&db, "host-a", &["show", "/root/a", "--json"])).unwrap();
    assert_eq!(
        (&shown["host"], shown.get("hostUnreachableSince")),
        (&json!("host-a"), None),
        "{shown}"
    );
    // The `thread` tool of A's serve: a poll and a list say it too, and the snapshot carries
    // the host and since when. A's own thread reads as before.
    let polled = a.thread(json!({"action": "poll", "id": "/root/b"}));
    let text = polled["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("Host: host-b unreachable since 2026-01-01T00:00:00.000Z")
            && text.contains("threadbase host forget host-b"),
        "{text}"
    );
    assert_eq!(
        polled["details"]["snapshot"]["hostUnreachable"],
        json!({"hostId": "host-b", "since": "2026-01-01T00:00:00.000Z"})
    );
    // Twice: a list renders it again rather than take a kept answer from before.
    for _ in 0..2 {
        let listed = a.thread(json!({"action": "list"}));
        let text = listed["content"][0]["text"].as_str().unwrap();
        assert!(
            line_of(text, "/root/b")
                .contains("host host-b unreachable since 2026-01-01T00:00:00.000Z"),
            "{text}"
        );
        assert!(!line_of(text, "/root/a").contains("unreachable"), "{text}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let polled = a.thread(json!({"action": "poll", "id": "/root/a"}));
    assert!(
        polled["details"]["snapshot"]
            .get("hostUnreachable")
            .is_none(),
        "{polled}"
    );
    // Host B comes back: its next serve restores its row, and the views read as on one host.
    let mut b = w.serve("host-b");
    b.thread(json!({"action": "list"}));
    let listed = a.thread(json!({"action": "list"}));
    let text = listed["content"][0]["text"].as_str().unwrap();
    assert!(!text.contains("unreachable"), "{text}");
    a.close(Duration::from_secs(20));
    b.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty(), "{:?}", w.base.leftovers());
}

/// The state of every thread row that a collision must leave alone: `(path, status, phase,
/// exit_kind, owner_pid, owner_started_at, updated_at)`, by path.
fn thread_states(db: &crate::support::sql::Conn) -> Vec<String> {
    let mut stmt = db
        .prepare(
            "SELECT path, status, phase, coalesce(exit_kind, '-'), coalesce(owner_pid, -1), \
             coalesce(owner_started_at, -1), updated_at FROM threads ORDER BY path",
        )
        .unwrap();
    let rows = stmt
        .query_map((), |r| {
            let (path, status, phase, exit): (String, String, String, String) =
                (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
            let (pid, started, updated): (i64, i64, String) = (r.get(4)?, r.get(5)?, r.get(6)?);
            Ok(format!(
                "{path} {status} {phase} {exit} {pid} {started} {updated}"
            ))
        })
        .unwrap();
    rows.map(Result::unwrap).collect()
}

/// A serve that must refuse to start: its exit code and stderr (it exits on its own).
fn refused(mut serve: Serve) -> (Option<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = serve.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the second serve started: {}",
            String::from_utf8_lossy(&serve.stderr.lock().unwrap())
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Its stderr is read to the end by the collector thread once the process is gone.
    std::thread::sleep(Duration::from_millis(100));
    let err = String::from_utf8_lossy(&serve.stderr.lock().unwrap()).into_owned();
    (status.code(), err)
}

/// The refusal's text: a conflict that names the host id, the other serve and one repair.
fn assert_collision_refusal(code: Option<i32>, err: &str, what: &str) {
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("error[conflict]") && err.contains("Host id beta is in use by serve pid"),
        "{err}"
    );
    assert!(err.contains(what), "{err}");
    assert_eq!(err.matches("Repair:").count(), 1, "{err}");
    assert!(
        err.contains("Repair: set THREADBASE_HOST_ID=") && err.contains("did not start"),
        "{err}"
    );
}

/// Issue 46: two serves with one host id in two PID namespaces (two containers that share the
/// machine id, or one THREADBASE_HOST_ID in a CI template). The first's thread runs; the
/// second sees a serve of its host id with a fresh heartbeat in a PID space it cannot see and
/// refuses to start; no thread of the first changes, through the first's own owner checks, a
/// `threadbase restore` run in the second's place, and after.
#[test]
fn a_second_serve_of_one_host_id_in_another_pid_namespace_refuses_to_start() {
    if !pid_namespaces_or_skip("a_second_serve_of_one_host_id_in_another_pid_namespace") {
        return;
    }
    let base = Scripted::new("hosts_collide_ns");
    base.script("script", &json!({"default_reply": "done"}).to_string());
    let db = || {
        let c = crate::support::sql::Conn::open(&base.db).unwrap();
        c.busy_timeout(Duration::from_secs(10)).unwrap();
        c
    };
    let mut first = serve_in_own_pid_namespace(&base, "ses_first", "beta");
    first.thread(json!({"action": "start", "prompt": "go", "taskName": "one"}));
    first.thread(json!({"action": "start", "prompt": "go", "taskName": "two"}));
    let deadline = Instant::now() + Duration::from_secs(20);
    while db()
        .query_row(
            "SELECT count(*) FROM threads WHERE pid IS NOT NULL AND phase = 'idle'",
            (),
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
        < 2
    {
        assert!(Instant::now() < deadline, "{:?}", thread_states(&db()));
        std::thread::sleep(Duration::from_millis(20));
    }
    until_host_beats(&db(), "beta");
    let before = thread_states(&db());

    // The second, pid 1 of a namespace of its own, as the first is.
    let second = serve_in_own_pid_namespace(&base, "ses_second", "beta");
    let (code, err) = refused(second);
    assert_collision_refusal(code, &err, "another PID space");
    assert!(!err.contains("restored"), "{err}");
    // A restore in the second's place (another PID namespace, the same host id) leaves them too.
    let out = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "--kill-child"])
        .arg(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&base.db)
        .arg("restore")
        .env("THREADBASE_HOST_ID", "beta")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("restored 0 threads"),
        "{text}"
    );
    // The first's owner checks run each second meanwhile.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(thread_states(&db()), before);
    let serves: i64 = db()
        .query_row("SELECT count(*) FROM host_serves", (), |r| r.get(0))
        .unwrap();
    assert_eq!(serves, 1, "the refused serve removed its heartbeat row");
    // The first still answers for its threads.
    let polled = first.thread(json!({"action": "poll", "id": "/root/one"}));
    assert!(polled.to_string().contains("idle"), "{polled}");
    first.close(Duration::from_secs(20));
    assert!(base.leftovers().is_empty(), "{:?}", base.leftovers());
}

/// Issue 46: a cloned machine (the same host id, another boot id: a VM image cloned with its
/// /etc/machine-id) refuses to start beside the original, and a restore there closes nothing
/// of the original's (it would read the rows as an earlier boot's, whose processes are gone).
#[test]
fn a_cloned_machine_with_the_same_host_id_refuses_to_start_and_closes_nothing() {
    let w = world("hosts_clone");
    let mut original = w.serve("beta");
    original.thread(json!({"action": "start", "prompt": "go", "taskName": "a"}));
    w.until_launched("/root/a");
    // Settled first: a turn ending later would change its row under the comparison below (it
    // did, under load).
    let r = original.thread(json!({"action": "wait", "id": "a", "timeoutMs": 20000}));
    assert_eq!(r["details"]["snapshot"]["phase"], "idle", "{r}");
    until_host_beats(&w.db(), "beta");
    let before = thread_states(&w.db());

    let args = vec![
        "--session-file".into(),
        w.parent_session.display().to_string(),
    ];
    let clone = w.base.serve(
        "script",
        args,
        &[
            ("THREADBASE_HOST_ID", "beta"),
            ("THREADBASE_TEST_BOOT_ID", "a-cloned-machines-boot"),
        ],
    );
    let (code, err) = refused(clone);
    assert_collision_refusal(code, &err, "of another machine (boot ");
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&w.base.db)
        .arg("restore")
        .env("THREADBASE_HOST_ID", "beta")
        .env("THREADBASE_TEST_BOOT_ID", "a-cloned-machines-boot")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("restored 0 threads"),
        "{text}"
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(thread_states(&w.db()), before);
    assert_eq!(w.row("/root/a").0, "live");
    original.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty(), "{:?}", w.base.leftovers());
}

/// The database's clock `secs` seconds ago, as heartbeats are written.
fn ago(secs: i64) -> String {
    threadbase::time::iso_from_ms(threadbase::time::now_ms() - secs * 1000)
}

/// Sets the heartbeat rows of each `(host, heartbeat_at, gap_from, resumed_at)`, as serves
/// write them (the test plays the serves' rows: an existing serve's row keeps its identity,
/// another host's is made); the rows of hosts not named go.
fn serve_rows(
    db: &crate::support::sql::Conn,
    rows: &[(&str, String, Option<String>, Option<String>)],
) {
    let named: Vec<String> = rows.iter().map(|r| format!("'{}'", r.0)).collect();
    db.execute(
        &format!(
            "DELETE FROM host_serves WHERE host_id NOT IN ({})",
            named.join(", ")
        ),
        (),
    )
    .unwrap();
    for (i, (host, beat, gap, resumed)) in rows.iter().enumerate() {
        let quote = |v: &Option<String>| v.as_ref().map_or("NULL".into(), |v| format!("'{v}'"));
        let (gap, resumed) = (quote(gap), quote(resumed));
        let known: i64 = db
            .query_row(
                "SELECT count(*) FROM host_serves WHERE host_id = ?1",
                [host],
                |r| r.get(0),
            )
            .unwrap();
        db.execute(
            &format!(
                "UPDATE host_serves SET heartbeat_at = '{beat}', gap_from = {gap}, resumed_at = {resumed} WHERE host_id = '{host}'"
            ),
            (),
        )
        .unwrap();
        if known == 0 {
            db.execute(
                &format!(
                    "INSERT INTO host_serves (host_id, boot_id, pid, started_at, first_at, heartbeat_at, pid_ns, gap_from, resumed_at) \
                     VALUES ('{host}', 'boot-{host}', {pid}, 1, '{beat}', '{beat}', NULL, {gap}, {resumed})",
                    pid = 100 + i,
                ),
                (),
            )
            .unwrap();
        }
    }
}

/// `host list --json` seen from host C: each host's `up`, and the outage window's end.
fn leases(db: &std::path::Path) -> (Vec<(String, bool)>, serde_json::Value) {
    let (code, out, err) = host_cli(db, "host-c", &["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let hosts = v["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["hostId"].as_str().unwrap().to_string(), h["up"] == true))
        .collect();
    (hosts, v["outageUntil"].clone())
}

/// The view thread_attention's word for the thread at `path`, if any.
fn attention_of(db: &crate::support::sql::Conn, path: &str) -> Option<String> {
    db.query_row(
        "SELECT attention FROM thread_attention WHERE path = ?1",
        [path],
        |r| r.get(0),
    )
    .ok()
}

/// Issue 46: a database outage longer than the lease does not make a healthy host unreachable.
/// Host B holds a live thread. Every heartbeat is 40 s old (the database was away, and no serve
/// has beaten since it came back): nobody is unreachable. Host A's serve beats again and
/// records its gap: until a lease after that, B (whose lease held when the outage began) is
/// not unreachable and `host forget host-b` is refused even with --force, while host Z, dead
/// long before the outage, stays unreachable. A lease after the resumption B is unreachable,
/// and a forget without --force is still refused while its last heartbeat is younger than two
/// leases; with --force it closes B's thread.
#[test]
fn after_an_outage_longer_than_the_lease_no_healthy_host_is_unreachable_nor_forgotten() {
    let w = world("hosts_outage");
    let db = w.base.db.clone();
    let mut b = w.serve("host-b");
    b.thread(json!({"action": "start", "prompt": "go", "taskName": "a"}));
    w.until_launched("/root/a");
    // B's serve stops beating (its thread's row stays live, as if B were slow to come back).
    b.child.kill().unwrap();
    b.child.wait().unwrap();

    // The database just came back: every heartbeat is old, B's and A's alike.
    serve_rows(
        &w.db(),
        &[
            ("host-a", ago(38), None, None),
            ("host-b", ago(40), None, None),
        ],
    );
    let (hosts, _) = leases(&db);
    assert_eq!(
        hosts,
        [("host-a".into(), true), ("host-b".into(), true)],
        "every heartbeat is old: the outage was the database's"
    );
    assert_eq!(attention_of(&w.db(), "/root/a"), None);
    let (code, _, err) = host_cli(&db, "host-c", &["forget", "host-b", "--force"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("is up") && err.contains("Repair:"), "{err}");

    // A's serve beat again a second ago and recorded its gap (its last beat before, 38 s ago);
    // host Z went away long before the outage.
    serve_rows(
        &w.db(),
        &[
            ("host-a", ago(1), Some(ago(38)), Some(ago(1))),
            ("host-b", ago(40), None, None),
            ("host-z", ago(200), None, None),
        ],
    );
    let (hosts, until) = leases(&db);
    assert_eq!(
        hosts,
        [
            ("host-a".into(), true),
            ("host-b".into(), true),
            ("host-z".into(), false)
        ]
    );
    assert!(until.is_string(), "{until}");
    let (_, text, _) = host_cli(&db, "host-c", &["list"]);
    assert!(
        text.contains("came back from an outage less than a lease ago"),
        "{text}"
    );
    assert_eq!(attention_of(&w.db(), "/root/a"), None);
    for args in [
        &["forget", "host-b"][..],
        &["forget", "host-b", "--force"][..],
    ] {
        let (code, _, err) = host_cli(&db, "host-c", args);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("came back from an outage less than a lease ago")
                && err.matches("Repair:").count() == 1,
            "{err}"
        );
    }
    assert_eq!(w.row("/root/a").0, "live");

    // A lease after the resumption: B is unreachable since its last heartbeat.
    serve_rows(
        &w.db(),
        &[
            ("host-a", ago(1), Some(ago(70)), Some(ago(31))),
            ("host-b", ago(40), None, None),
        ],
    );
    let (hosts, until) = leases(&db);
    assert_eq!(hosts, [("host-a".into(), true), ("host-b".into(), false)]);
    assert!(until.is_null(), "{until}");
    assert_eq!(
        attention_of(&w.db(), "/root/a").as_deref(),
        Some("unreachable")
    );
    // Its last heartbeat is younger than two leases: a forget needs --force.
    let (code, _, err) = host_cli(&db, "host-c", &["forget", "host-b"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("less than two leases") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(w.row("/root/a").0, "live");
    let (code, out, err) = host_cli(&db, "host-c", &["forget", "host-b", "--force"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("closed 1 live thread as stale"), "{out}");
    assert_eq!(w.row("/root/a").1.as_deref(), Some("stale"));
    assert!(
        w.base.leftovers().is_empty() || {
            // B's child exits once its serve's pipes closed; give it a moment.
            std::thread::sleep(Duration::from_secs(2));
            w.base.leftovers().is_empty()
        }
    );
}

/// Issue 46: a serve's heartbeats record the gap once, on the first success after a failure
/// (or after one that took longer than a heartbeat's period), from the last success before.
#[test]
fn a_serves_heartbeats_record_their_gap_once_after_a_failure_or_a_slow_beat() {
    use threadbase::store::hosts::{Heartbeats, HEARTBEAT};
    let fast = Duration::from_millis(3);
    let mut beats = Heartbeats::default();
    assert_eq!(beats.gap_from(), None);
    // A first heartbeat that fails knows no success before it: nothing to record.
    beats.failed();
    assert_eq!(beats.gap_from(), None);
    assert!(!beats.succeeded("t1".into(), fast));
    assert_eq!(beats.gap_from(), None);
    beats.failed();
    beats.failed();
    assert_eq!(beats.gap_from(), Some("t1"));
    assert!(!beats.succeeded("t2".into(), fast));
    assert_eq!(beats.gap_from(), None);
    // A heartbeat that waited longer than its period: beat again at once, with the gap.
    assert!(beats.succeeded("t3".into(), HEARTBEAT + Duration::from_secs(1)));
    assert_eq!(beats.gap_from(), Some("t2"));
    assert!(!beats.succeeded("t4".into(), fast));
    assert_eq!(beats.gap_from(), None);
}

/// Issue 46: `host list` and `check` flag a host id that serves of two machines hold at once
/// (a collision from before the start check, or two serves started at the same instant).
#[test]
fn host_list_and_check_flag_a_host_id_held_from_two_machines() {
    let w = world("hosts_collision_flag");
    let db = w.base.db.clone();
    let mut a = w.serve("host-a");
    a.thread(json!({"action": "list"}));
    until_host_beats(&w.db(), "host-a");
    a.close(Duration::from_secs(20));
    serve_rows(
        &w.db(),
        &[("beta", ago(1), None, None), ("gamma", ago(1), None, None)],
    );
    w.db()
        .execute(
            &format!(
                "INSERT INTO host_serves (host_id, boot_id, pid, started_at, first_at, heartbeat_at) \
                 VALUES ('beta', 'another-boot', 7, 7, '{n}', '{n}')",
                n = ago(2)
            ),
            (),
        )
        .unwrap();
    let (code, out, err) = host_cli(&db, "host-c", &["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let flags: Vec<(&str, bool)> = v["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["hostId"].as_str().unwrap(), h["collision"] == true))
        .collect();
    assert_eq!(flags, [("beta", true), ("gamma", false)], "{v}");
    let (_, text, _) = host_cli(&db, "host-c", &["list"]);
    assert!(
        line_of(&text, "beta").contains("COLLISION")
            && !line_of(&text, "gamma").contains("COLLISION"),
        "{text}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&db)
        .args(["check", "--json"])
        .env("THREADBASE_HOST_ID", "host-c")
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let problems = report["problems"].as_array().unwrap();
    let collision: Vec<&serde_json::Value> = problems
        .iter()
        .filter(|p| p["check"] == "host_id_collision")
        .collect();
    assert_eq!(collision.len(), 1, "{report}");
    assert!(
        collision[0]["message"]
            .as_str()
            .unwrap()
            .contains("Host id beta")
            && collision[0]["repair"]
                .as_str()
                .unwrap()
                .contains("THREADBASE_HOST_ID"),
        "{report}"
    );
}

/// `threadbase check --json` on host `host`: its exit code and report.
fn check_as(db: &std::path::Path, host: &str) -> (i32, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(db)
        .args(["check", "--json"])
        .env("THREADBASE_HOST_ID", host)
        .output()
        .unwrap();
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "check printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), doc)
}

/// Issue 46: `check` judges another host's live rows by that host's lease, never by a pid of
/// this host (it reported `live_without_pid` for them, naming a pid that here is another
/// process): a two-host database is clean from every host, and a host whose lease ran out is
/// reported with `threadbase host forget HOST` as the repair.
#[test]
fn check_judges_another_hosts_live_rows_by_its_lease() {
    let w = world("hosts_check");
    let db = w.base.db.clone();
    let mut b = w.serve("host-b");
    b.thread(json!({"action": "list"}));
    until_host_beats(&w.db(), "host-b");
    let mut a = w.serve("host-a");
    a.thread(json!({"action": "start", "prompt": "go", "taskName": "a"}));
    b.thread(json!({"action": "start", "prompt": "go", "taskName": "b"}));
    w.until_launched("/root/a");
    w.until_launched("/root/b");
    until_host_beats(&w.db(), "host-a");
    for host in ["host-a", "host-b", "host-c"] {
        let (code, doc) = check_as(&db, host);
        assert_eq!(
            (code, &doc["problems"]),
            (0, &json!([])),
            "seen from {host}: {doc:#}"
        );
        assert_eq!(doc["checked"]["live_threads"], 2, "{doc}");
    }

    // B's serve dies: while its lease holds, its row is its own host's to judge.
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    let (code, doc) = check_as(&db, "host-a");
    assert_eq!((code, &doc["problems"]), (0, &json!([])), "{doc:#}");
    // Its lease runs out: one warning, naming the host, since when, its thread, and the repair.
    lease_ran_out(&w.db(), "host-b");
    let (code, doc) = check_as(&db, "host-a");
    assert_eq!(code, 0, "a warning, not an error: {doc:#}");
    let problems = doc["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{doc:#}");
    let p = &problems[0];
    assert_eq!(
        (&p["check"], &p["severity"], &p["repair"]),
        (
            &json!("host_unreachable"),
            &json!("warning"),
            &json!("threadbase host forget host-b")
        ),
        "{p}"
    );
    let message = p["message"].as_str().unwrap();
    assert!(
        message.starts_with("Host host-b is unreachable since 2026-01-01T00:00:00.000Z")
            && message.contains("1 live thread held there")
            && message.contains("(/root/b)")
            && !message.contains("/root/a")
            && !message.contains("Repair:"),
        "{message}"
    );
    let text = cli(&db, "host-a", &["check"]);
    assert!(
        text.contains("warning [host_unreachable] Host host-b is unreachable since")
            && text.contains("Repair: threadbase host forget host-b\n"),
        "{text}"
    );
    // The repair works: the host is forgotten, and the database is clean again.
    cli(&db, "host-a", &["host", "forget", "host-b"]);
    let (code, doc) = check_as(&db, "host-a");
    assert_eq!((code, &doc["problems"]), (0, &json!([])), "{doc:#}");
    a.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty(), "{:?}", w.base.leftovers());
}

/// Issue 46: `threadbase web` on host A stops and sends to threads host B holds: each action is
/// a `commands` row B's serve claims and carries out, as `top`'s and the CLI's are (the page
/// refused them, saying "the serve … is gone": it looked B's serve's pid up on host A, where
/// B's serve, pid 1 of a PID namespace of its own, is another process). Once B's lease ran out,
/// a thread of B says `host unreachable` since when, and its stop and send are refused at once,
/// saying why, with nothing written.
#[test]
fn the_web_page_stops_and_sends_to_another_hosts_threads_and_refuses_an_unreachable_hosts() {
    use crate::support::browser::{self, Browser, Web};
    const TEST: &str = "the_web_page_stops_and_sends_to_another_hosts_threads";
    if !browser::available(TEST) || !pid_namespaces_or_skip(TEST) {
        return;
    }
    let base = Scripted::new("hosts_web");
    // Each child's first turn works for 30 s: busy until stopped.
    base.script(
        "script",
        r#"{"turns":[{"steps":[{"delay_ms":30000},{"text":"x"}]}],"default_reply":"done"}"#,
    );
    let mut b = serve_in_own_pid_namespace(&base, "ses_hosts_web", "host-b");
    for task in ["one", "two", "three"] {
        let r = b
            .thread(json!({"action": "start", "prompt": format!("{task} work"), "taskName": task}));
        assert_eq!(r["details"]["kind"], "started", "{r}");
    }
    let db = || crate::support::sql::Conn::open(&base.db).unwrap();
    let row = |path: &str| -> (String, String, Option<String>, bool) {
        db().query_row(
            "SELECT id, status, exit_kind, pid IS NOT NULL FROM threads WHERE path = ?1",
            [path],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !["/root/one", "/root/two", "/root/three"]
        .iter()
        .all(|p| row(p).3)
    {
        assert!(Instant::now() < deadline, "all three launched");
        std::thread::sleep(Duration::from_millis(20));
    }
    until_host_beats(&db(), "host-b");
    let commands = || -> i64 {
        db().query_row("SELECT count(*) FROM commands", (), |r| r.get(0))
            .unwrap()
    };
    let web = Web::start_on_host(&base.db, "hosts-web-token-0123456789", "host-a");

    // The detail of a thread host B holds names its host and offers its stop and send.
    let (status, d) = web.get(&format!("/api/thread?id={}", row("/root/one").0));
    assert_eq!(status, 200, "{d}");
    assert_eq!(d["host"], "host-b", "{d}");
    assert!(d.get("hostUnreachableSince").is_none(), "{d}");
    for a in d["actions"].as_array().unwrap() {
        if ["stop", "force_stop", "send"].contains(&a["action"].as_str().unwrap()) {
            assert_eq!(a["enabled"], true, "{d}");
        }
    }

    // Stop /root/one from the page: B's serve stops it.
    let page = Browser::start();
    page.goto(&web.url());
    page.wait_for(
        "the tree",
        "return document.querySelectorAll('.row.thread').length >= 3",
        Duration::from_secs(10),
    );
    let open = |path: &str| {
        page.click(&format!(".row.thread[data-path=\"{path}\"]"));
        page.wait_for(
            &format!("{path}'s detail"),
            &format!("const h = document.getElementById('detail-path'); return h && h.textContent === '{path}' && !!document.querySelector('#detail .actions')"),
            Duration::from_secs(5),
        );
    };
    open("/root/one");
    page.wait_for(
        "the stop button",
        "const b = document.getElementById('act-stop'); return b && !b.disabled",
        Duration::from_secs(5),
    );
    page.click("#act-stop");
    page.wait_for(
        "the confirmation",
        "return !document.getElementById('confirm').hidden",
        Duration::from_secs(5),
    );
    page.click("#confirm-yes");
    let result = page.wait_for(
        "the stop's result",
        "const t = document.getElementById('action-result').textContent; return t.includes('done') || t.includes('failed') ? t : null",
        Duration::from_secs(20),
    );
    assert!(
        result.as_str().unwrap().starts_with("stop: done"),
        "{result}"
    );
    let (_, status, exit, _) = row("/root/one");
    assert_eq!(
        (status.as_str(), exit.as_deref()),
        ("closed", Some("stopped"))
    );

    // Send to /root/two from the page (busy: a follow-up), carried out by B's serve.
    open("/root/two");
    page.click("#act-send");
    page.eval(
        "document.getElementById('send-message').value = 'Also check the docs.'; return true;",
    );
    page.click("#send-go");
    let result = page.wait_for(
        "the send's result",
        "const t = document.getElementById('action-result').textContent; return t.includes('done') || t.includes('failed') ? t : null",
        Duration::from_secs(20),
    );
    assert!(
        result.as_str().unwrap().starts_with("send: done"),
        "{result}"
    );
    let (_, d) = web.get(&format!("/api/thread?id={}", row("/root/two").0));
    let sent = d["sent"].as_array().unwrap();
    assert!(
        sent.iter()
            .any(|m| m["body"] == "Also check the docs." && m["by"] == "the web page"),
        "{d}"
    );
    // A force stop of it (the API the page's button posts).
    let (status, a) = web.post(
        "/api/action",
        &json!({"thread": row("/root/two").0, "action": "force_stop"}),
    );
    assert_eq!(status, 200, "{a}");
    let command = a["command"].as_i64().unwrap();
    let done = crate::support::common::poll(
        Duration::from_secs(20),
        Duration::from_millis(25),
        "the force stop's outcome",
        || {
            let (_, c) = web.get(&format!("/api/command?id={command}"));
            (c["state"] == "done" || c["state"] == "failed").then_some(c)
        },
    );
    assert_eq!(done["state"], "done", "{done}");
    assert_eq!(row("/root/two").1, "closed");

    // Host B goes away (its namespace, serve and child with it) and its lease runs out.
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    lease_ran_out(&db(), "host-b");
    let before = commands();
    let (_, d) = web.get(&format!("/api/thread?id={}", row("/root/three").0));
    assert_eq!(d["hostUnreachableSince"], "2026-01-01T00:00:00.000Z", "{d}");
    for a in d["actions"].as_array().unwrap() {
        if ["stop", "force_stop", "send"].contains(&a["action"].as_str().unwrap()) {
            let why = a["why"].as_str().unwrap_or("");
            assert!(
                a["enabled"] == false
                    && why.contains(
                        "is held on host host-b, unreachable since 2026-01-01T00:00:00.000Z"
                    )
                    && why.contains("threadbase host forget host-b"),
                "{a}"
            );
        }
    }
    let started = Instant::now();
    for action in [
        json!({"thread": row("/root/three").0, "action": "stop"}),
        json!({"thread": row("/root/three").0, "action": "send", "message": "hello"}),
    ] {
        let (status, e) = web.post("/api/action", &action);
        assert_eq!(status, 409, "{e}");
        let message = e["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("unreachable since 2026-01-01T00:00:00.000Z")
                && message.matches("Repair:").count() == 1,
            "{message}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(commands(), before, "a refused action writes no command");
    // The page says so: the row, the detail's host line and the greyed buttons' reasons.
    page.wait_for(
        "/root/three unreachable in its row",
        "const el = document.querySelector('.row.thread[data-path=\"/root/three\"]'); return el && el.dataset.state.startsWith('live/host unreachable since 2026-01-01 00:00:00')",
        Duration::from_secs(10),
    );
    open("/root/three");
    let line = page.wait_for(
        "the host line",
        "const el = document.getElementById('detail-host'); return el ? el.textContent : null",
        Duration::from_secs(5),
    );
    assert!(
        line.as_str()
            .unwrap()
            .starts_with("host unreachable since 2026-01-01 00:00:00"),
        "{line}"
    );
    let stop =
        page.eval("const b = document.getElementById('act-stop'); return [b.disabled, b.title];");
    assert_eq!(stop[0], true, "{stop}");
    assert!(
        stop[1]
            .as_str()
            .unwrap()
            .contains("threadbase host forget host-b"),
        "{stop}"
    );
    page.screenshot(&browser::screenshot_dir().join("host-unreachable.png"));
    assert_eq!(page.eval("return window.tb.errors"), json!([]));
    drop(page);
    drop(web);
    host_cli(&base.db, "host-a", &["forget", "host-b"]);
    assert!(base.leftovers().is_empty(), "{:?}", base.leftovers());
}
