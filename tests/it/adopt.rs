//! Adoption (contract A): a closed thread of a Pi session that has ended moves under another
//! session, by that session's `resume` of its exact id or canonical path, or by `threadbase
//! adopt` from a shell; never while its own session's serve runs. Real serves, scripted
//! children, and `threadbase check` to see that the forest and the usage totals stay whole.

use crate::support::serve_client;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};
use serve_client::{Scripted, Serve};
use threadbase::domain::{SessionId, ThreadId};

struct World {
    base: Scripted,
}

impl World {
    fn new() -> World {
        let base = Scripted::new("adopt");
        base.script(
            "script",
            &json!({"turns": [[{"text": "first answer"}]]}).to_string(),
        );
        World { base }
    }

    /// A Pi session file `<name>.jsonl` with header id `id`.
    fn session(&self, name: &str, id: &str) -> PathBuf {
        let header = json!({"type":"session","version":3,"id":id,"timestamp":"2026-12-04T00:00:00.000Z","cwd":self.base.root});
        self.base
            .session_file(&format!("sessions/{name}.jsonl"), &[header])
    }

    fn serve(&self, session: &Path) -> Serve {
        let args = vec!["--session-file".into(), session.display().to_string()];
        self.base.serve("script", args, &[])
    }

    fn threadbase(&self, args: &[&str]) -> Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(&self.base.db)
            .args(args)
            .env("PI_CODING_AGENT_DIR", self.base.root.join("agent"))
            .current_dir(&self.base.root)
            .output()
            .unwrap()
    }

    fn sql(&self, query: &str) -> Vec<Value> {
        let out = self.threadbase(&["sql", "--json", query]);
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    /// `threadbase check` finds no errors (places, usage totals, links all whole).
    fn check_whole(&self) {
        let out = self.threadbase(&["check", "--json"]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["ok"], true, "{v:#}");
    }

    /// Session `a` starts /root/job, which answers; then `a`'s serve ends (its thread closed
    /// by the serve's own end). Returns the thread id.
    fn ended_session_with_a_thread(&self, a: &Path) -> String {
        let mut s = self.serve(a);
        let r = s.thread(json!({"action": "start", "prompt": "Do the job", "taskName": "job"}));
        let id = r["details"]["snapshot"]["id"].as_str().unwrap().to_string();
        let w = s.thread(json!({"action": "wait", "id": id, "timeoutMs": 10000}));
        assert_eq!(w["details"]["timedOut"], false, "{w}");
        s.close(Duration::from_secs(20));
        id
    }
}

fn text(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap()
}

#[test]
fn a_new_session_adopts_an_ended_sessions_thread_by_resuming_its_id() {
    let w = World::new();
    let a = w.session("a", "ses_a");
    let id = w.ended_session_with_a_thread(&a);
    let b = w.session("b", "ses_b");
    let mut s = w.serve(&b);
    let r = s.thread(json!({"action": "resume", "id": id}));
    assert_eq!(r["details"]["kind"], "resumed", "{r}");
    assert!(
        text(&r).contains(
            "Note: adopted from Pi session ses_a, which has ended (its path there: /root/job)."
        ),
        "{}",
        text(&r)
    );
    let rows = w.sql(&format!(
        "SELECT m.session_id, t.path, f.root_session FROM threads t JOIN managers m ON m.id = t.manager_id JOIN thread_forest f ON f.id = t.id WHERE t.id = '{id}'"
    ));
    assert_eq!(
        rows,
        vec![json!({"session_id": "ses_b", "path": "/root/job", "root_session": "ses_b"})]
    );
    let event = w.sql(&format!(
        "SELECT data FROM thread_events WHERE thread_id = '{id}' AND type = 'thread_adopted'"
    ));
    let data: Value = serde_json::from_str(event[0]["data"].as_str().unwrap()).unwrap();
    assert_eq!(
        data,
        json!({"by": "resume", "fromSession": "ses_a", "oldPath": "/root/job", "path": "/root/job", "below": 0})
    );
    // The session now manages it: list and wait reach it.
    let list = s.thread(json!({"action": "list"}));
    assert!(text(&list).contains("/root/job"), "{}", text(&list));
    s.close(Duration::from_secs(20));
    w.check_whole();
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn resume_by_canonical_path_adopts_when_one_ended_session_has_it() {
    let w = World::new();
    let id = w.ended_session_with_a_thread(&w.session("a", "ses_a"));
    let mut s = w.serve(&w.session("b", "ses_b"));
    let r = s.thread(json!({"action": "resume", "id": "/root/job"}));
    assert_eq!(r["details"]["thread"]["id"], id.as_str(), "{r}");
    s.close(Duration::from_secs(20));
    w.check_whole();
}

#[test]
fn a_thread_whose_session_is_running_is_never_adopted() {
    let w = World::new();
    let a = w.session("a", "ses_a");
    let mut owner = w.serve(&a);
    let r = owner.thread(json!({"action": "start", "prompt": "Do the job", "taskName": "job"}));
    let id = r["details"]["snapshot"]["id"].as_str().unwrap().to_string();
    owner.thread(json!({"action": "wait", "id": id, "timeoutMs": 10000}));
    owner.thread(json!({"action": "stop", "id": id}));
    let b = w.session("b", "ses_b");
    let mut s = w.serve(&b);
    let e = s.thread_error(json!({"action": "resume", "id": id}));
    assert_eq!(e["code"], "unknown_reference", "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("of another Pi session"),
        "{e}"
    );
    let out = w.threadbase(&["adopt", &id, "--into", b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("/root/job (")
            && stderr.contains("belongs to Pi session ses_a, whose serve is running"),
        "{stderr}"
    );
    assert!(stderr.contains("Repair:"), "{stderr}");
    let rows = w.sql(&format!(
        "SELECT m.session_id FROM threads t JOIN managers m ON m.id = t.manager_id WHERE t.id = '{id}'"
    ));
    assert_eq!(rows, vec![json!({"session_id": "ses_a"})]);
    s.close(Duration::from_secs(20));
    owner.close(Duration::from_secs(20));
    assert!(w.base.leftovers().is_empty());
}

#[test]
fn threadbase_adopt_moves_a_thread_into_the_newest_session_of_this_folder() {
    let w = World::new();
    let id = w.ended_session_with_a_thread(&w.session("a", "ses_a"));
    // The session `pi -c` would continue here: the newest file of Pi's session folder for
    // this directory (the agent dir the world's serves use).
    let dir = threadbase::pi::session::session_dir_for(&w.base.root.join("agent"), &w.base.root);
    std::fs::create_dir_all(&dir).unwrap();
    let header = json!({"type":"session","version":3,"id":"ses_new","timestamp":"2026-12-04T01:00:00.000Z","cwd":w.base.root});
    let newest = dir.join("2026-12-04T01-00-00-000Z_ses_new.jsonl");
    std::fs::write(&newest, format!("{header}\n")).unwrap();
    let out = w.threadbase(&["adopt", "/root/job"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let newest = dunce::canonicalize(&newest).unwrap();
    assert_eq!(
        stdout,
        format!(
            "Adopted /root/job ({id}) from Pi session ses_a into Pi session ses_new ({f}).\nContinue with `pi --session {f}` and resume it: thread {{\"action\": \"resume\", \"id\": \"/root/job\"}}.\n",
            f = newest.display()
        )
    );
    w.check_whole();
    // That session's serve reaches it at once.
    let mut s = w.serve(&newest);
    let r = s.thread(json!({"action": "poll", "id": "job"}));
    assert_eq!(r["details"]["snapshot"]["id"], id.as_str(), "{r}");
    s.close(Duration::from_secs(20));
    // Adopting again finds nothing of another session.
    let again = w.threadbase(&["adopt", &id, "--into", newest.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("No thread of another Pi session"),
        "{again:?}"
    );
}

/// A thread with threads below it in its children's own managers moves with them: every place
/// of the subtree lands in the adopting session's tree exactly where V4's backfill would put
/// it from the rows, and each tree's total moves by what the subtree spent.
#[test]
fn an_adopted_subtree_takes_its_places_and_spend_to_the_new_tree() {
    use crate::support::common;
    use threadbase::store::threads::{upsert_manager, Contract};
    use threadbase::store::usage::{self, Usage};
    use threadbase::Store;

    let db = common::temp_db();
    let store = Store::open(&db.path).unwrap();
    let manager = |session: &str, scope: &str, self_id: Option<&ThreadId>| {
        store
            .write(|tx| {
                upsert_manager(
                    tx,
                    &common::manager_spec(
                        &SessionId::new(session),
                        Contract::Thread,
                        scope,
                        self_id,
                    ),
                )
            })
            .unwrap()
    };
    let (t, u, v, other) = (
        ThreadId::new(common::tid(1)),
        ThreadId::new(common::tid(2)),
        ThreadId::new(common::tid(3)),
        ThreadId::new(common::tid(4)),
    );
    let a = manager("ses_a", "/root", None);
    common::add(&store, &[common::thread(t.as_str(), a, "/root/t", false)]);
    let below_t = manager("ses_of_t", "/root/t", Some(&t));
    common::add(
        &store,
        &[common::thread(u.as_str(), below_t, "/root/t/u", false)],
    );
    let below_u = manager("ses_of_u", "/root/t/u", Some(&u));
    common::add(
        &store,
        &[common::thread(v.as_str(), below_u, "/root/t/u/v", false)],
    );
    let b = manager("ses_b", "/root", None);
    common::add(
        &store,
        &[common::thread(other.as_str(), b, "/root/other", false)],
    );
    let spent = |n: i64| Usage {
        input_tokens: n,
        output_tokens: n,
        cost_usd: n as f64 / 100.0,
        turns: 1,
        ..Usage::default()
    };
    store
        .write(|tx| {
            for (id, n) in [(&t, 1), (&u, 10), (&v, 100), (&other, 1000)] {
                usage::add(tx, id, &spent(n), "2026-12-04T00:00:00.000Z")?;
            }
            Ok(())
        })
        .unwrap();
    let adopted = store
        .write(|tx| threadbase::store::adopt::adopt(tx, &t, b, "adopt", "2026-12-04T00:00:01.000Z"))
        .unwrap();
    assert_eq!((adopted.path.as_str(), adopted.below), ("/root/t", 2));
    let conn = store.read().unwrap();
    let tree = |root: &str| {
        let s = usage::tree_spend(
            &conn,
            usage::TreeOf {
                thread_id: None,
                self_id: None,
                session_id: &SessionId::new(root),
            },
        )
        .unwrap();
        (s.threads, s.usage.input_tokens)
    };
    assert_eq!(tree("ses_a"), (0, 0));
    assert_eq!(tree("ses_b"), (4, 1111));
    drop(conn);
    // The migration's backfill (SQLite's V4, so on SQLite) over the same rows places every
    // thread the same way.
    if crate::support::database_is_sqlite(&db.path) {
        // The migration's backfill over the same rows places every thread the same way.
        let migration = include_str!("../../migrations/V4__usage_and_forest.sql");
        let start = migration
            .find("-- Places for the threads that exist already")
            .unwrap();
        let end = migration
            .find("-- Threads recorded before this version")
            .unwrap();
        let mut raw = rusqlite::Connection::open(&db.path).unwrap();
        let tx = raw.transaction().unwrap();
        let dump =
            |tx: &rusqlite::Connection| -> Vec<(String, String, Option<String>, String, i64)> {
                let mut s = tx
                .prepare("SELECT thread_id, root_session, forest_parent_id, tree_key, level FROM thread_places ORDER BY thread_id")
                .unwrap();
                s.query_map((), |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
            };
        let by_adoption = dump(&tx);
        assert!(
            by_adoption.iter().all(|p| p.1 == "ses_b"),
            "{by_adoption:#?}"
        );
        tx.execute_batch("DELETE FROM thread_places").unwrap();
        tx.execute_batch(&migration[start..end]).unwrap();
        assert_eq!(dump(&tx), by_adoption);
        tx.rollback().unwrap();
        drop(raw);
    }
    drop(store);
    let out = common::threadbase(&db.path, &["check", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], true, "{v:#}");
}

/// A thread left live by a serve that died (no restore pass has run yet) is closed as stale
/// first, then adopted; `threadbase adopt` says so in its event, and check stays whole.
#[test]
fn a_thread_left_live_by_a_dead_serve_is_closed_as_stale_then_adopted() {
    use crate::support::common;
    use threadbase::store::threads::{upsert_manager, Contract, ManagerSpec};
    use threadbase::Store;

    let w = World::new();
    let b = w.session("b", "ses_b");
    let id = common::tid(7);
    {
        let store = Store::open(&w.base.db).unwrap();
        let dead_session = SessionId::new("ses_dead");
        let dead = ManagerSpec {
            owner_pid: Some(999_999_999),
            owner_started_at: Some(1),
            ..common::manager_spec(&dead_session, Contract::Thread, "/root", None)
        };
        let m = store.write(|tx| upsert_manager(tx, &dead)).unwrap();
        common::add(&store, &[common::thread(&id, m, "/root/left", true)]);
        store
            .write(|tx| {
                tx.execute_script(&crate::support::sql::with(
                    "UPDATE threads SET owner_pid = 999999999, owner_started_at = 1 WHERE id = ?1",
                    [&id],
                ))?;
                Ok(())
            })
            .unwrap();
    }
    let out = w.threadbase(&["adopt", &id, "--into", b.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let rows = w.sql(&format!(
        "SELECT t.status, t.exit_kind, m.session_id FROM threads t JOIN managers m ON m.id = t.manager_id WHERE t.id = '{id}'"
    ));
    assert_eq!(
        rows,
        vec![json!({"status": "closed", "exit_kind": "stale", "session_id": "ses_b"})]
    );
    w.check_whole();
}

/// Issue 46: a resume, by id from another session, of a thread that last ran on another host
/// says where its history is (its session file is on that host, not gone) and names a missing
/// cwd as such; refused, it adopts nothing: the thread stays in its own session. On its own
/// host a missing cwd is named too (not a child Pi that failed to start).
#[test]
fn a_refused_resume_of_another_hosts_thread_says_where_it_is_and_adopts_nothing() {
    let w = World::new();
    // Session A's serve runs on host-a and ends; its manager is then owned by nobody (what
    // `threadbase host forget host-a` writes while host-a has a serve row; a manager of another
    // host otherwise counts as living here), so a session of host-b may adopt its threads.
    let a_file = w.session("a", "ses_a");
    let mut a = w.base.serve(
        "script",
        vec!["--session-file".into(), a_file.display().to_string()],
        &[("THREADBASE_HOST_ID", "host-a")],
    );
    let r = a.thread(json!({"action": "start", "prompt": "Do the job", "taskName": "job"}));
    let id = r["details"]["snapshot"]["id"].as_str().unwrap().to_string();
    let r = a.thread(json!({"action": "wait", "id": id, "timeoutMs": 10000}));
    assert_eq!(r["details"]["timedOut"], false, "{r}");
    a.close(Duration::from_secs(20));
    let db = crate::support::sql::Conn::open(&w.base.db).unwrap();
    db.execute(
        "UPDATE managers SET owner_pid = NULL, owner_started_at = NULL, host_id = NULL, boot_id = NULL WHERE session_id = 'ses_a'",
        (),
    )
    .unwrap();
    let (host, file, cwd): (String, String, String) = db
        .query_row(
            "SELECT host_id, session_file, cwd FROM threads WHERE id = ?1",
            [id.as_str()],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    let session_of = || -> String {
        db.query_row(
            "SELECT m.session_id FROM threads t JOIN managers m ON m.id = t.manager_id WHERE t.id = ?1",
            [id.as_str()],
            |r| r.get(0),
        )
        .unwrap()
    };
    let args = vec![
        "--session-file".into(),
        w.session("b", "ses_b").display().to_string(),
    ];
    let mut b = w
        .base
        .serve("script", args, &[("THREADBASE_HOST_ID", "host-b")]);

    // Its session file is on its host, not here.
    let kept = std::fs::read(&file).unwrap();
    std::fs::remove_file(&file).unwrap();
    let e = b.thread_error(json!({"action": "resume", "id": id}));
    assert_eq!(e["code"], "not_resumable", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "it last ran on host {host}, and its Pi session file {file} is there, not on this host (host-b)"
        )) && message.contains(&format!("Repair: resume it from a Pi session on host {host}")),
        "{message}"
    );
    assert!(!message.contains("history is gone"), "{message}");
    assert_eq!(message.matches("Repair:").count(), 1, "{message}");
    assert_eq!(session_of(), "ses_a", "a refused resume adopts nothing");

    // Its cwd is not a folder here.
    std::fs::write(&file, kept).unwrap();
    let missing = w.base.root.join("gone-folder");
    db.execute(
        "UPDATE threads SET cwd = ?1 WHERE id = ?2",
        [missing.display().to_string(), id.clone()],
    )
    .unwrap();
    let e = b.thread_error(json!({"action": "resume", "id": id}));
    assert_eq!(e["code"], "not_resumable", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "its cwd {} is not a folder on this host (host-b); it last ran on host {host}",
            missing.display()
        )),
        "{message}"
    );
    assert!(!message.contains("Failed to start child Pi"), "{message}");
    assert_eq!(session_of(), "ses_a", "a refused resume adopts nothing");
    b.close(Duration::from_secs(20));

    // On its own host, by its own session: the missing cwd, named.
    let mut a = w.base.serve(
        "script",
        vec!["--session-file".into(), a_file.display().to_string()],
        &[("THREADBASE_HOST_ID", "host-a")],
    );
    let e = a.thread_error(json!({"action": "resume", "id": id}));
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("its cwd {} does not exist", missing.display())),
        "{e}"
    );
    // Once the folder is back, the resume goes through.
    db.execute(
        "UPDATE threads SET cwd = ?1 WHERE id = ?2",
        [cwd, id.clone()],
    )
    .unwrap();
    let r = a.thread(json!({"action": "resume", "id": id}));
    assert_eq!(r["details"]["kind"], "resumed", "{r}");
    a.close(Duration::from_secs(20));
    assert_eq!(session_of(), "ses_a");
    w.check_whole();
    assert!(w.base.leftovers().is_empty());
}
