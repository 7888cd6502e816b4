//! A PostgreSQL server for the tests that need one: `THREADBASE_TEST_PG` is its URL
//! (`postgres://USER@HOST:PORT/DB`; `.ci/run` starts a throwaway cluster and sets it, and
//! `eval "$(bash .ci/postgres start DIR)"` does the same by hand). Without it a test prints
//! `SKIPPED` and returns; under `CI=true` it fails ([`super::common::required_or_skip`]).
//!
//! Each test works in a schema of its own ([`TestSchema`]), created empty and dropped with
//! everything in it when the test ends, so tests run in parallel against one database and
//! leave nothing behind.

use std::sync::atomic::{AtomicU32, Ordering};

use tokio_postgres::{Client, NoTls};

/// The variable that holds the test server's URL.
pub const URL_VAR: &str = "THREADBASE_TEST_PG";

/// The test server's URL; `None` (after printing why) means "skip this test", and under
/// `CI=true` a missing URL fails the test instead.
pub fn url_or_skip(test: &str) -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            super::common::required_or_skip(
                test,
                "PostgreSQL",
                &format!(
                    "{URL_VAR} is not set (start a throwaway server with `eval \"$(bash .ci/postgres start /tmp/threadbase-pg)\"`)"
                ),
            );
            None
        }
    }
}

/// A fresh schema on the test server, the `search_path` of [`TestSchema::client`]; dropped
/// (with everything in it) on drop.
pub struct TestSchema {
    pub name: String,
    url: String,
    pub runtime: tokio::runtime::Runtime,
    pub client: Client,
}

impl TestSchema {
    /// A new empty schema named after `test`, or `None` when there is no server (see
    /// [`url_or_skip`]).
    pub fn new(test: &str) -> Option<TestSchema> {
        let url = url_or_skip(test)?;
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "tb_{}_{}_{}",
            test.chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .take(30)
                .collect::<String>()
                .to_ascii_lowercase(),
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let client = runtime.block_on(connect(&url));
        runtime
            .block_on(
                client.batch_execute(&format!("CREATE SCHEMA {name}; SET search_path TO {name};")),
            )
            .unwrap_or_else(|e| panic!("create schema {name}: {e}"));
        Some(TestSchema {
            name,
            url,
            runtime,
            client,
        })
    }

    /// Another connection whose `search_path` is this schema.
    pub fn connect(&self) -> Client {
        let client = self.runtime.block_on(connect(&self.url));
        self.runtime
            .block_on(client.batch_execute(&format!("SET search_path TO {}", self.name)))
            .unwrap();
        client
    }

    /// The URL a threadbase process opens to work in this schema (its `search_path` set by the
    /// connection's options).
    pub fn database_url(&self) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}options=-csearch_path%3D{}", self.url, self.name)
    }

    /// Runs `f` on the schema's runtime.
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let drop = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
        if let Err(e) = self.runtime.block_on(self.client.batch_execute(&drop)) {
            eprintln!("could not drop the test schema {}: {e}", self.name);
        }
    }
}

/// A connection to `url`, its connection task spawned on the current runtime.
pub async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {URL_VAR}: {e}"));
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("postgres connection: {e}");
        }
    });
    client
}

/// The variable that runs the store's tests on PostgreSQL: with `THREADBASE_TEST_BACKEND=postgres`
/// every database the tests make ([`super::common::temp_db`], `Scripted`) is a fresh schema on
/// the test server instead of a SQLite file (`.ci/run` runs the suite once each way).
pub const BACKEND_VAR: &str = "THREADBASE_TEST_BACKEND";

/// Whether this run's databases are PostgreSQL schemas.
pub fn backend_is_postgres() -> bool {
    std::env::var(BACKEND_VAR).is_ok_and(|v| v == "postgres")
}

/// How long a serve is given to hear of another process's commit on PostgreSQL
/// ([`read_until_heard`]).
pub const HEARD_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// What `read` gives once `heard` holds of it, after another process changed the database.
///
/// A serve keeps answers in memory while the database has not changed (`engine/cache.rs`). On
/// SQLite its change counter is exact, so the first read must already hold: it is returned
/// as it is. On PostgreSQL the serve hears of another process's commit when the commit's
/// notification arrives, which PostgreSQL sends after the commit returned (within a
/// millisecond on loopback, later on a loaded machine), so the read is repeated for up to
/// [`HEARD_WITHIN`]. Either way the caller asserts on what is returned.
pub fn read_until_heard<T>(mut read: impl FnMut() -> T, heard: impl Fn(&T) -> bool) -> T {
    let by = std::time::Instant::now() + HEARD_WITHIN;
    loop {
        let r = read();
        if !backend_is_postgres() || heard(&r) || std::time::Instant::now() > by {
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// A fresh schema for a test's database when this run is on PostgreSQL (the server is then
/// required: the run asked for it), else `None`.
pub fn schema_for_run(test: &str) -> Option<TestSchema> {
    if !backend_is_postgres() {
        return None;
    }
    let schema = TestSchema::new(test);
    assert!(
        schema.is_some(),
        "{BACKEND_VAR}=postgres needs {URL_VAR}: the PostgreSQL run cannot skip"
    );
    schema
}
