//! What the runtime tests share: a `Runtime` over a temporary database with one contract A
//! manager, the `starting` rows they launch children into, and what the children left in the
//! rows.

#[allow(unused_imports)]
use crate::support::sql::Rusqlite as _;
use std::sync::Arc;
use threadbase::domain::{ManagerId, Phase, ThreadId};

use serde_json::Value;
use threadbase::runtime::{LaunchSpec, Runtime, RuntimeConfig, StartKind};
use threadbase::store::events;
use threadbase::Store;

use super::common;

/// A runtime over a temporary database (kept while this lives) with the manager of `session`.
pub struct RuntimeDb {
    _db: common::TempDb,
    pub store: Arc<Store>,
    pub rt: Runtime,
    pub manager: ManagerId,
}

impl RuntimeDb {
    pub fn new(session: &str, config: RuntimeConfig) -> RuntimeDb {
        let db = common::temp_db();
        let store = Arc::new(Store::open(&db.path).unwrap());
        let manager = common::manager(&store, session);
        let rt = Runtime::new(store.clone(), config);
        RuntimeDb {
            _db: db,
            store,
            rt,
            manager,
        }
    }

    /// Inserts the `starting` row of thread `common::tid(n)` at `/root/<name>`; returns its id.
    pub fn starting_thread(&self, n: u64, name: &str) -> ThreadId {
        let id = ThreadId::new(common::tid(n));
        insert_starting(
            &self.store,
            self.manager,
            id.as_str(),
            &format!("/root/{name}"),
        );
        id
    }

    /// The row of thread `id` as one JSON object: `fields` are the arguments of `json_object`
    /// over `threads t LEFT JOIN thread_output o`.
    pub fn row_json(&self, id: &ThreadId, fields: &str) -> Value {
        let sql = format!(
            "SELECT json_object({fields}) FROM threads t
             LEFT JOIN thread_output o ON o.thread_id = t.id WHERE t.id = ?1"
        );
        let text: String = self
            .store
            .read()
            .unwrap()
            .query_row(&sql, [id], |r| r.get(0))
            .unwrap();
        serde_json::from_str(&text).unwrap()
    }

    /// The events of thread `id`, oldest first: (type, data).
    pub fn events(&self, id: &ThreadId) -> Vec<(String, Value)> {
        events::of_thread(&self.store.read().unwrap(), id)
            .unwrap()
            .into_iter()
            .map(|e| (e.kind, e.data))
            .collect()
    }
}

/// A tokio runtime with two worker threads, for a test that is not `#[tokio::test]`.
pub fn two_workers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The launch of thread `id` as `bash -c <script>` in the temporary folder, with `env` added.
pub fn bash_launch(
    id: &ThreadId,
    script: &str,
    env: Vec<(String, String)>,
    start: StartKind,
) -> LaunchSpec {
    LaunchSpec {
        thread_id: id.clone(),
        argv: vec!["bash".into(), "-c".into(), script.into()],
        cwd: std::env::temp_dir(),
        env,
        clear_env: false,
        start,
    }
}

/// Inserts a live contract A row for `id` at `path` in phase `starting`, as a launch finds it.
pub fn insert_starting(store: &Store, manager: ManagerId, id: &str, path: &str) {
    let mut t = common::thread(id, manager, path, true);
    t.phase = Phase::Starting;
    common::add(store, &[t]);
}
