//! Reads never write (issue 47): every read verb of the three contracts through serve, and
//! every inspection command, against a database of settled threads, leave every row of every
//! table as it was, and no transaction wrote: SQLite's change counter (`PRAGMA data_version`
//! read on a connection of the test's own, which moves on any other connection's commit) and
//! PostgreSQL's count of written rows (`pg_stat_xact…` can't see another session: the
//! tables' `n_tup_ins/upd/del` of `pg_stat_user_tables`, flushed by the writers) stay put.
//! On both backends.

use super::{with_serve, SCRIPT};
use crate::support::common::threadbase;
use crate::support::postgres::backend_is_postgres;
use crate::support::sql::values;
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// Every table's rows, sorted, as text; but `host_serves`, whose heartbeat the serve writes
/// every 5 s on its own timer (no read's write).
fn dump(db: &Path) -> Vec<String> {
    let tables = if backend_is_postgres() {
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
    } else {
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1"
    };
    let mut out = Vec::new();
    for t in values(db, tables) {
        let name = crate::support::sql::json(t[0].clone());
        let name = name.as_str().unwrap().to_string();
        if name == "host_serves" {
            continue;
        }
        let mut rows: Vec<String> = values(db, &format!("SELECT * FROM {name}"))
            .into_iter()
            .map(|r| format!("{name}: {r:?}"))
            .collect();
        rows.sort();
        out.extend(rows);
    }
    out
}

/// How many changes were committed, but for `host_serves` heartbeats where that can be told
/// apart: PostgreSQL's written row counts of every other table; SQLite's change counter on a
/// connection of the test's own (every commit of anyone, heartbeats too: the caller reads it
/// between two heartbeats).
struct Writes {
    sqlite: Option<rusqlite::Connection>,
}

impl Writes {
    fn new(db: &Path) -> Writes {
        Writes {
            sqlite: (!backend_is_postgres()).then(|| rusqlite::Connection::open(db).unwrap()),
        }
    }

    fn count(&self, db: &Path) -> i64 {
        match &self.sqlite {
            Some(c) => c
                .query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))
                .unwrap(),
            None => {
                let v = values(
                    db,
                    "SELECT pg_stat_force_next_flush(), coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0)::bigint \
                     FROM pg_stat_user_tables WHERE schemaname = current_schema() AND relname <> 'host_serves'",
                );
                match crate::support::sql::json(v[0][1].clone()) {
                    serde_json::Value::Number(n) => n.as_i64().unwrap(),
                    other => panic!("{other}"),
                }
            }
        }
    }
}

#[test]
fn reads_of_every_contract_and_command_write_nothing() {
    let (w, mut s) = with_serve(SCRIPT);
    s.thread(json!({"action": "start", "prompt": "Say hi", "taskName": "hi"}));
    s.thread(json!({"action": "wait", "id": "hi", "timeoutMs": 20000}));
    s.thread(json!({"action": "stop", "id": "hi"}));
    let id = super::details(&s.thread(json!({"action": "poll", "id": "hi"})))["snapshot"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let db = w.base.db.clone();
    let url_or_path = db.display().to_string();
    let writes = Writes::new(&db);
    // Each read twice: the first renders, the second is the kept answer.
    let reads = [
        ("thread", json!({"action": "poll", "id": "hi"})),
        (
            "thread",
            json!({"action": "poll", "id": id, "detail": "full"}),
        ),
        (
            "thread",
            json!({"action": "poll", "id": "/root/hi", "detail": "tail"}),
        ),
        ("thread", json!({"action": "list"})),
        (
            "thread",
            json!({"action": "list", "state": "closed", "visibility": "all"}),
        ),
        ("thread", json!({"action": "list", "parent": "/root"})),
        ("thread", json!({"action": "list", "ancestor": "/root"})),
        (
            "thread",
            json!({"action": "wait", "id": "hi", "timeoutMs": 0}),
        ),
        ("agent_status", json!({})),
        ("threads_list", json!({})),
        (
            "threads.snapshot",
            json!({"coordinatorIDs": ["ses_0123456789abcdef0123456789abcdef"]}),
        ),
    ];
    let commands: [&[&str]; 12] = [
        &["list"],
        &["list", "--json"],
        &["tree"],
        &["show", &id],
        &["events", &id],
        &["usage"],
        &["usage", "--json"],
        &["check"],
        &["sql", "SELECT count(*) FROM threads"],
        &["host", "list"],
        &["budget", "show"],
        &["worktree", "list"],
    ];
    // The serve's heartbeat (every 5 s) moves SQLite's counter: measured between two.
    for attempt in 0.. {
        let (rows, counted) = (dump(&db), writes.count(&db));
        for _ in 0..2 {
            for (method, params) in &reads {
                let n = s.send(method, params.clone());
                let r = s.response(n, Duration::from_secs(20));
                assert!(r.get("error").is_none(), "{method} {params}: {r}");
            }
        }
        for args in commands {
            let out = threadbase(&db, args);
            assert!(
                out.status.success(),
                "threadbase {args:?} on {url_or_path}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert_eq!(dump(&db), rows, "a read changed a row");
        if writes.count(&db) == counted {
            break;
        }
        // SQLite's counter sees the heartbeats too, and PostgreSQL's counts arrive late (a
        // backend reports them at most once a second, so the setup's own writes may land in a
        // first try): a read that writes moves them on every try, three tries.
        assert!(attempt < 3, "a read committed a write");
    }
    s.close(Duration::from_secs(20));
}

/// The statements the serve `s` (run with `THREADBASE_TEST_COUNT_STATEMENTS=1`) says it ran
/// for request `n`, and how many write transactions: its stderr line once the request ended.
fn counted(s: &crate::support::serve_client::Serve, n: u64) -> (u64, u64) {
    let prefix = format!("threadbase: request {n} ran ");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let err = String::from_utf8_lossy(&s.stderr.lock().unwrap()).into_owned();
        // Whole lines only: the reader thread may have copied part of the last one so far
        // ("… ran 2 statements, " read as a count of writes that does not parse).
        let whole = &err[..err.rfind('\n').map_or(0, |i| i + 1)];
        if let Some(line) = whole.lines().find_map(|l| l.strip_prefix(&prefix)) {
            // "N statements, W writes"
            let words: Vec<&str> = line.split(' ').collect();
            return (words[0].parse().unwrap(), words[2].parse().unwrap());
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no count for request {n}: {err}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Issue 46 item 3: a poll whose answer the serve does not hold in memory costs two
/// statements, the reference's lookup and the thread's facts (`sql/thread_facts.sql`), and
/// writes nothing: of a closed thread and of a live idle one this serve holds (asked for its
/// state first), by id and by path, at two details (each a first poll of its key, so none is
/// served from memory). Then a kept answer costs none, or two again when a heartbeat's commit
/// meanwhile dropped it. On both backends.
#[test]
fn a_poll_costs_two_statements_and_writes_nothing() {
    let w = super::world(serde_json::from_str(SCRIPT).unwrap());
    let mut s = w.serve(&[("THREADBASE_TEST_COUNT_STATEMENTS", "1")]);
    let mut ids = Vec::new();
    for name in ["done", "idle"] {
        let r = s.thread(json!({"action": "start", "prompt": "Say hi", "taskName": name}));
        ids.push(
            super::details(&r)["snapshot"]["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
        s.thread(json!({"action": "wait", "id": name, "timeoutMs": 20000}));
    }
    s.thread(json!({"action": "stop", "id": "done"}));
    let mut seen = Vec::new();
    for (id, name, status) in [(&ids[0], "done", "closed"), (&ids[1], "idle", "live")] {
        let path = format!("/root/{name}");
        for reference in [id.as_str(), path.as_str()] {
            for detail in ["summary", "full"] {
                let params = json!({"action": "poll", "id": reference, "detail": detail});
                let n = s.send("thread", params.clone());
                let r = s.response(n, Duration::from_secs(20));
                assert!(r.get("error").is_none(), "{params}: {r}");
                let snap = &super::details(&r["result"])["snapshot"];
                assert_eq!(snap["status"], status, "{params}: {r}");
                assert_eq!(counted(&s, n), (2, 0), "{params}");
                // Again: the kept answer (nothing run), unless a commit dropped it meanwhile.
                let again = s.send("thread", params.clone());
                s.response(again, Duration::from_secs(20));
                let (statements, writes) = counted(&s, again);
                assert!(statements == 0 || statements == 2, "{params}: {statements}");
                assert_eq!(writes, 0, "{params}");
                seen.push(statements);
            }
        }
    }
    // Some repeated poll of the closed thread was answered from memory. A heartbeat's commit
    // (every 5 s) can drop a kept answer between two polls, so a few more pairs are tried.
    let poll = json!({"action": "poll", "id": &ids[0]});
    let kept = seen.contains(&0)
        || (0..20).any(|_| {
            let first = s.send("thread", poll.clone());
            s.response(first, Duration::from_secs(20));
            let again = s.send("thread", poll.clone());
            s.response(again, Duration::from_secs(20));
            counted(&s, again).0 == 0
        });
    assert!(kept, "no poll was answered from memory: {seen:?}");
    s.close(Duration::from_secs(20));
}
