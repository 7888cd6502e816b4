//! Shared helpers for integration tests: temporary database files and seeded trees.

use std::path::PathBuf;

use threadbase::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec, NewThread};
use threadbase::Store;

/// A temporary folder that holds one database file.
pub struct TempDb {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

pub fn temp_db() -> TempDb {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("nested").join("threadbase.sqlite");
    TempDb { dir, path }
}

pub fn manager(store: &Store, session: &str) -> i64 {
    store
        .write(|tx| {
            upsert_manager(
                tx,
                &ManagerSpec {
                    session_id: session,
                    contract: Contract::Thread,
                    scope_path: "/root",
                    depth: 0,
                    self_thread_id: None,
                    session_file: None,
                    cwd: Some("/tmp"),
                    owner_pid: Some(std::process::id() as i64),
                    owner_started_at: None,
                },
            )
        })
        .expect("manager")
}

/// A contract A thread row at `path` (whose parent row, if any, must exist for parent_id).
pub fn thread(id: &str, manager_id: i64, path: &str, live: bool) -> NewThread {
    let parent = threadbase::paths::parent_path(path).map(str::to_string);
    let task = threadbase::paths::basename(path).to_string();
    NewThread {
        id: id.to_string(),
        manager_id,
        path: path.to_string(),
        parent_path: parent,
        parent_id: None,
        name: task.replace('_', " "),
        task_name: task,
        depth: threadbase::paths::segment_count(path) as i64 - 1,
        cwd: "/tmp".into(),
        args: vec![],
        status: if live { "live" } else { "closed" },
        phase: if live { "idle" } else { "stale" },
        ..Default::default()
    }
}

/// Inserts threads in one transaction. Closed ones get a stale exit.
pub fn add(store: &Store, rows: &[NewThread]) {
    store
        .write(|tx| {
            for t in rows {
                if t.status == "closed" {
                    let mut live = t.clone();
                    live.status = "live";
                    insert_thread(tx, &live)?;
                    tx.execute(
                        "UPDATE threads SET status='closed', phase='stale', exit_kind='stale', exit_message='seeded' WHERE id=?1",
                        [&t.id],
                    )?;
                } else {
                    insert_thread(tx, t)?;
                }
            }
            Ok(())
        })
        .expect("seed threads");
}

/// A deterministic contract A id for test number `n`.
pub fn tid(n: u64) -> String {
    format!("thread_{n:012x}")
}
