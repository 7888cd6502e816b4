//! The inspection CLI against a database seeded through the library API.

use crate::support::common;

use std::process::{Command, Output};

use common::{add, manager, temp_db, thread, threadbase, tid};
use threadbase::domain::ThreadId;
use threadbase::store::events::{self, NewEvent};
use threadbase::Store;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn seed() -> common::TempDb {
    let db = temp_db();
    let store = Store::open(&db.path).unwrap();
    let m = manager(&store, "ses_cli");
    add(
        &store,
        &[
            thread(&tid(1), m, "/root/docs", true),
            thread(&tid(2), m, "/root/docs/review", false),
            thread(&tid(3), m, "/root/api_survey", true),
        ],
    );
    store
        .write(|tx| {
            events::append(
                tx,
                &ThreadId::new(tid(3)),
                &[
                    NewEvent {
                        at: "2026-11-30T00:00:00.000Z",
                        kind: "thread_started",
                        data: "{\"pid\":42}",
                    },
                    NewEvent {
                        at: "2026-11-30T00:00:01.000Z",
                        kind: "tool_started",
                        data: "{\"toolName\":\"bash\"}",
                    },
                ],
            )
        })
        .unwrap();
    db
}

#[test]
fn sql_reads_and_refuses_writes() {
    let db = seed();
    let out = threadbase(&db.path, &["sql", "SELECT path FROM thread_tree"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout(&out),
        "path\n-----------------\n/root/api_survey\n/root/docs\n/root/docs/review\n(3 rows)\n"
    );

    let out = threadbase(
        &db.path,
        &["sql", "--json", "SELECT id, path, phase FROM live_threads"],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["path"], "/root/api_survey");
    assert_eq!(v.as_array().unwrap().len(), 2);

    for write in [
        "DELETE FROM threads",
        "UPDATE threads SET archived = 1",
        "INSERT INTO managers (session_id, contract, created_at, updated_at) VALUES ('x', 'thread', 'n', 'n')",
        "DROP TABLE threads",
        // A pragma that writes (SQLite's; PostgreSQL has none).
        if crate::support::database_is_sqlite(&db.path) {
            "PRAGMA journal_mode = DELETE"
        } else {
            "CREATE TABLE t (x int)"
        },
    ] {
        let out = threadbase(&db.path, &["sql", write]);
        assert_eq!(out.status.code(), Some(2), "{write} must be refused");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("read-only") && err.contains("Repair:"), "{err}");
    }
    let out = threadbase(&db.path, &["sql", "SELECT count(*) AS n FROM threads"]);
    assert!(
        stdout(&out).contains("\n3\n"),
        "nothing was changed: {}",
        stdout(&out)
    );

    // A statement the database refuses: its words, and one `Repair:` (issue 46: PostgreSQL's
    // carried the generic database error's too).
    for bad in ["SELEC nonsense", "SELECT nope FROM threads"] {
        let out = threadbase(&db.path, &["sql", bad]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.matches("Repair:").count(), 1, "{err}");
        assert!(
            err.contains("pass exactly one valid SELECT statement"),
            "{err}"
        );
        assert!(err.contains("SELEC") || err.contains("nope"), "{err}");
    }
}

#[test]
fn list_tree_show_events() {
    let db = seed();
    let out = threadbase(&db.path, &["list"]);
    let text = stdout(&out);
    assert!(text.starts_with("session ses_cli"), "{text}");
    assert!(text.lines().nth(1).unwrap().starts_with("PATH"), "{text}");
    assert!(text.contains("3 threads (2 live, 1 closed)"), "{text}");

    let out = threadbase(&db.path, &["list", "--json", "--state", "closed"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["count"], 1);
    assert_eq!(v["threads"][0]["path"], "/root/docs/review");

    let text = stdout(&threadbase(&db.path, &["tree"]));
    assert!(text.contains("session ses_cli"), "{text}");
    assert!(
        text.contains("    review  /root/docs/review"),
        "nested one level deeper: {text}"
    );

    for reference in ["api_survey", "/root/api_survey", "thread_000000000003"] {
        let out = threadbase(&db.path, &["show", reference]);
        assert!(out.status.success(), "{reference}: {out:?}");
        let text = stdout(&out);
        assert!(text.contains("path         /root/api_survey"), "{text}");
        assert!(text.contains("tool_started"), "{text}");
    }
    let out = threadbase(
        &db.path,
        &["show", "--manager", "ses_cli", "docs/review", "--json"],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "closed");

    let out = threadbase(&db.path, &["events", "api_survey", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[1]["type"], "tool_started");
    assert_eq!(v[1]["data"]["toolName"], "bash");

    let out = threadbase(&db.path, &["show", "nobody"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown_reference") && err.contains("Repair:"),
        "{err}"
    );
}

#[test]
fn a_missing_database_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = threadbase(&dir.path().join("none.sqlite"), &["sql", "SELECT 1"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("No database at") && err.contains("Repair:"),
        "{err}"
    );
    assert!(
        !dir.path().join("none.sqlite").exists(),
        "a read-only command creates nothing"
    );
}

/// Issue 46: a URL of another database (`mysql://…`, any `scheme://`) is refused as an
/// unsupported database, by the reading commands and by serve, instead of being taken for a
/// relative file path (a folder `mysql:`) where serve would create a SQLite file.
#[test]
fn a_url_of_another_database_is_refused_as_unsupported() {
    let dir = tempfile::tempdir().unwrap();
    for (url, args) in [
        ("mysql://team@db.internal/threadbase", &["list"][..]),
        ("sqlite:///tmp/x.sqlite", &["sql", "SELECT 1"][..]),
        ("mysql://team@db.internal/threadbase", &["serve"][..]),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(url)
            .args(args)
            .current_dir(dir.path())
            .env_remove("THREADBASE_DB")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{url} {args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let scheme = url.split("://").next().unwrap();
        assert!(
            err.contains(&format!("unsupported database ({scheme})")),
            "{err}"
        );
        assert_eq!(err.matches("Repair:").count(), 1, "{err}");
    }
    // Through the environment too.
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("tree")
        .current_dir(dir.path())
        .env("THREADBASE_DB", "mysql://team@db.internal/threadbase")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("unsupported database (mysql)"));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing was created"
    );
}

/// Issue 46: a server that asks for a password none was given for was reached, so the error
/// says the password is missing and how to give it, not to fix the URL's host and port. The
/// server here is a stand-in that answers every startup with "send a cleartext password".
#[test]
fn a_missing_password_is_named_and_its_repair_is_pgpassword() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            // Startup packets: int32 length, int32 code; an SSL request (80877103) is declined.
            loop {
                let mut head = [0u8; 8];
                if stream.read_exact(&mut head).is_err() {
                    break;
                }
                let len = u32::from_be_bytes(head[..4].try_into().unwrap()) as usize;
                let mut rest = vec![0u8; len.saturating_sub(8)];
                if stream.read_exact(&mut rest).is_err() {
                    break;
                }
                if u32::from_be_bytes(head[4..].try_into().unwrap()) == 80_877_103 {
                    let _ = stream.write_all(b"N");
                    continue;
                }
                // AuthenticationCleartextPassword.
                let _ = stream.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 3]);
                let _ = stream.read(&mut [0u8; 64]);
                break;
            }
        }
    });
    let url = format!("postgres://alice@127.0.0.1:{port}/team");
    let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .args(["--db", &url, "list"])
        .env_remove("THREADBASE_DB")
        .env_remove("PGPASSWORD")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("asks user alice for a password and none was given"),
        "{err}"
    );
    assert!(err.contains("Repair: set PGPASSWORD"), "{err}");
    assert!(!err.contains("host and port"), "{err}");
    assert_eq!(err.matches("Repair:").count(), 1, "{err}");
}

/// `threadbase pi install` writes the extension as shipped in `pi-extension/`, byte for byte
/// (the copy is compiled into the binary), plus the binary record; with no `pi` on PATH it edits
/// settings.json itself. `uninstall` removes both. Runs without Pi (the real-Pi side is
/// tests/it/real_pi_install.rs).
#[test]
fn pi_install_writes_the_shipped_extension_and_uninstall_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent");
    let run = |verb: &str| {
        Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .args(["pi", verb])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", dir.path())
            .env("PI_CODING_AGENT_DIR", &agent)
            .output()
            .unwrap()
    };
    let o = run("install");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let package = agent.join("threadbase");
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("pi-extension");
    let mut names = Vec::new();
    for e in std::fs::read_dir(&shipped).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        assert_eq!(
            std::fs::read(e.path()).unwrap(),
            std::fs::read(package.join(&name)).unwrap_or_default(),
            "pi-extension/{name} differs from the installed copy: add it to EXTENSION_FILES in src/cli/pi.rs"
        );
        names.push(name);
    }
    assert_eq!(
        std::fs::read_dir(&package).unwrap().count(),
        names.len() + 1,
        "the shipped files plus threadbase.json"
    );
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(package.join("threadbase.json")).unwrap()).unwrap();
    assert_eq!(
        record["bin"],
        std::fs::canonicalize(env!("CARGO_BIN_EXE_threadbase"))
            .unwrap()
            .display()
            .to_string()
    );
    let package_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(package.join("package.json")).unwrap()).unwrap();
    assert_eq!(package_json["name"], "threadbase");
    assert_eq!(
        std::fs::read_to_string(agent.join("settings.json")).unwrap(),
        "{\n  \"packages\": [\n    \"threadbase\"\n  ]\n}"
    );
    let o = run("uninstall");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!package.exists());
    assert_eq!(
        std::fs::read_to_string(agent.join("settings.json")).unwrap(),
        "{\n  \"packages\": []\n}"
    );
}

/// A statement that never ends by itself.
const ENDLESS: &str =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
/// Ten rows, 1..=10.
const TEN: &str =
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 10) SELECT x FROM c";

#[test]
fn sql_timeout_stops_a_runaway_statement() {
    let db = seed();
    let started = std::time::Instant::now();
    let out = threadbase(&db.path, &["sql", "--timeout", "0.5", ENDLESS]);
    let took = started.elapsed();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("threadbase: error[limit]: The statement ran longer than --timeout 0.5 s and was stopped"), "{err}");
    assert!(
        err.contains("nothing was written")
            && err.contains("Repair: raise the bound with --timeout SECONDS (0 turns it off)"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    assert!(took < std::time::Duration::from_secs(20), "{took:?}");
    // The default bound (30 s) and `--timeout 0` leave a quick statement alone.
    for args in [&["sql", TEN][..], &["sql", "--timeout", "0", TEN]] {
        let out = threadbase(&db.path, args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout(&out).ends_with("(10 rows)\n"), "{}", stdout(&out));
    }
    for bad in ["-1", "soon", "inf", "NaN"] {
        let out = threadbase(&db.path, &["sql", "--timeout", bad, "SELECT 1"]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("Repair: pass --timeout with a number"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn ctrl_c_interrupts_the_statement() {
    if crate::support::sql::sqlite_only("ctrl_c_interrupts_the_statement", "sqlite3_interrupt on Ctrl-C; on PostgreSQL Ctrl-C ends the process and the server the statement") {
        return;
    }
    let db = seed();
    let child = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(&db.path)
        .args(["sql", ENDLESS])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Give it time to start the statement (the handler is in place before the first step).
    std::thread::sleep(std::time::Duration::from_millis(700));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let started = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(130), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("threadbase: Interrupted (Ctrl-C): the statement was stopped after"),
        "{err}"
    );
    assert!(err.contains("nothing was written"), "{err}");
}

#[test]
fn sql_max_rows_caps_the_rows_and_says_how_many_were_left_out() {
    let db = seed();
    let out = threadbase(&db.path, &["sql", "--max-rows", "3", TEN]);
    assert!(out.status.success());
    assert_eq!(
        stdout(&out),
        "x\n-\n1\n2\n3\n(3 rows shown; 7 more rows left out by --max-rows 3)\n"
    );
    let out = threadbase(&db.path, &["sql", "--max-rows", "9", TEN]);
    assert!(stdout(&out).ends_with("(9 rows shown; 1 more row left out by --max-rows 9)\n"));
    // Not reached: the usual footer.
    let out = threadbase(&db.path, &["sql", "--max-rows", "10", TEN]);
    assert!(
        stdout(&out).ends_with("\n10\n(10 rows)\n"),
        "{}",
        stdout(&out)
    );
    // --json: stdout stays one JSON document; the note goes to stderr.
    let out = threadbase(&db.path, &["sql", "--json", "--max-rows", "2", TEN]);
    assert!(out.status.success());
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows, serde_json::json!([{"x": 1}, {"x": 2}]));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "threadbase sql: 8 more rows left out by --max-rows 2. Repair: raise --max-rows to see them.\n"
    );
    // Counting an endless rest stops at the timeout: the rows shown, the count a lower bound.
    // (SQLite's: it steps the rows itself; PostgreSQL's statement_timeout ends the statement,
    // which cli::sql_timeout_stops_a_runaway_statement covers.)
    if !crate::support::database_is_sqlite(&db.path) {
        return;
    }
    let endless_rows =
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c";
    let out = threadbase(
        &db.path,
        &["sql", "--max-rows", "2", "--timeout", "0.3", endless_rows],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout(&out);
    assert!(
        text.starts_with("x\n-\n1\n2\n(2 rows shown; at least "),
        "{text}"
    );
    assert!(
        text.ends_with(
            " more rows left out by --max-rows 2; counting them stopped at --timeout 0.3 s)\n"
        ),
        "{text}"
    );
}

/// A live row whose owning serve is gone reads `live/owner gone` in `tree` and `usage` (the
/// same words everywhere, `domain::state_words`), and reading it writes nothing: the row stays
/// live until a restore pass closes it.
#[test]
fn a_live_thread_whose_owner_is_gone_says_so_without_a_write() {
    let db = temp_db();
    let store = Store::open(&db.path).unwrap();
    let m = manager(&store, "ses_owner");
    let me = threadbase::runtime::signals::ProcessIdentity::current();
    let held = thread(&tid(1), m, "/root/held", true);
    let orphan = thread(&tid(2), m, "/root/orphan", true);
    let done = thread(&tid(3), m, "/root/done", false);
    add(&store, &[held, orphan, done]);
    store
        .write(|tx| {
            // The held one's owner is this process; the orphan's is this pid with another start
            // time (a reused pid, not the owner).
            tx.execute_script(&crate::support::sql::with(
                "UPDATE threads SET owner_pid = ?1, owner_started_at = CASE path WHEN '/root/held' THEN ?2 ELSE ?2 + 12345 END WHERE status = 'live'",
                [me.pid, me.started_at]))?;
            Ok(())
        })
        .unwrap();
    drop(store);
    let out = threadbase(&db.path, &["tree"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    let line = |p: &str| {
        text.lines()
            .find(|l| l.contains(p))
            .unwrap_or_default()
            .to_string()
    };
    assert!(line("/root/held").contains("[live/idle]"), "{text}");
    assert!(line("/root/orphan").contains("[live/owner gone]"), "{text}");
    assert!(line("/root/done").contains("[closed/stale]"), "{text}");
    let out = threadbase(&db.path, &["usage", "--json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let states: Vec<String> = doc
        .to_string()
        .split("\"state\":\"")
        .skip(1)
        .map(|s| s.split('"').next().unwrap().to_string())
        .collect();
    assert!(states.contains(&"live/owner gone".to_string()), "{doc}");
    let conn = crate::support::sql::Conn::open(&db.path).unwrap();
    let status: String = conn
        .query_row(
            "SELECT status FROM threads WHERE path = '/root/orphan'",
            (),
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(status, "live", "reading wrote nothing");
}
