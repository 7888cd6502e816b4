//! A server on the same machine, reached over its Unix socket
//! (`postgres://USER@/DB?host=/socket/dir&port=PORT`, docs/configuration.md): a serve starts,
//! waits for and polls a child there, its connections are the socket's (the server sees no
//! client address), and the reading commands and the child's own `THREADBASE_DB` work the same.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::support::common::threadbase;
use crate::support::postgres::TestSchema;
use crate::support::serve_client::Scripted;

/// The server's connections of threadbase that came over a Unix socket (`client_port` -1).
const SOCKET_CONNECTIONS: &str = "SELECT count(*) FROM pg_stat_activity \
     WHERE application_name = 'threadbase' AND client_port = -1";

/// The one value `sql` reads through the schema's own (TCP) connection.
fn value<T: for<'a> tokio_postgres::types::FromSql<'a>>(schema: &TestSchema, sql: &str) -> T {
    schema
        .block_on(schema.client.query_one(sql, &[]))
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .get(0)
}

#[test]
fn a_serve_and_the_cli_reach_a_local_server_over_its_unix_socket() {
    let Some(schema) = TestSchema::new("unix_socket") else {
        return;
    };
    let setting = |sql: &str| -> String { value(&schema, sql) };
    let dirs = setting("SELECT current_setting('unix_socket_directories')");
    let dir = dirs.split(',').next().unwrap_or("").trim().to_string();
    if dir.is_empty() {
        crate::support::common::required_or_skip(
            "a_serve_and_the_cli_reach_a_local_server_over_its_unix_socket",
            "a PostgreSQL server with a Unix socket",
            "the test server's unix_socket_directories is empty",
        );
        return;
    }
    let port = setting("SELECT current_setting('port')");
    let user = setting("SELECT current_user::text");
    let db = setting("SELECT current_database()::text");
    let url = format!(
        "postgres://{user}@/{db}?host={dir}&port={port}&options=-csearch_path%3D{}",
        schema.name
    );
    let count = |sql: &str| -> i64 { value(&schema, sql) };
    let before = count(SOCKET_CONNECTIONS);

    let mut base = Scripted::new("unix_socket");
    base.db = PathBuf::from(&url);
    base.script("script", &json!({"default_reply": "done"}).to_string());
    let mut s = base.serve(
        "script",
        vec!["--session-id".into(), "ses_sock".into()],
        &[],
    );
    s.thread(json!({"action": "start", "prompt": "go", "taskName": "over_socket"}));
    let r = s.thread(json!({"action": "wait", "id": "over_socket", "timeoutMs": 30000}));
    assert_eq!(r["details"]["snapshot"]["phase"], "idle", "{r}");
    let r = s.thread(json!({"action": "poll", "id": "over_socket"}));
    assert_eq!(r["details"]["snapshot"]["path"], "/root/over_socket", "{r}");
    // The serve's connections came over the socket (other tests reach the server over TCP).
    let during = count(SOCKET_CONNECTIONS);
    assert!(
        during > before,
        "no threadbase connection over the socket while the serve runs ({before} before, {during} during)"
    );
    // The rows are in the schema, whichever way they are read.
    assert_eq!(
        count(&format!(
            "SELECT count(*) FROM {}.threads WHERE path = '/root/over_socket'",
            schema.name
        )),
        1
    );
    let cli = |args: &[&str]| {
        let out = threadbase(Path::new(&url), args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "threadbase {args:?}: {err}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(cli(&["tree"]).contains("/root/over_socket"));
    assert!(cli(&["check"]).contains("ok: no problems found"));
    assert!(s.close(std::time::Duration::from_secs(30)).success());
    assert!(base.leftovers().is_empty(), "{:?}", base.leftovers());

    // A socket folder with no server is the same clear error as a refused TCP connection.
    let missing = tempfile::tempdir().unwrap();
    let nowhere = format!(
        "postgres://{user}@/{db}?host={}&port={port}",
        missing.path().display()
    );
    let out = threadbase(Path::new(&nowhere), &["tree"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("Cannot connect to PostgreSQL at") && err.contains("Repair:"),
        "{err}"
    );
}
