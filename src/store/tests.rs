use super::sqlite::open::{embedded, migration_checksum, open_error, up_to_date};
use super::sqlite::Connection;

/// The up-to-date check computes refinery's own checksums for this build's migrations, and
/// lists them as refinery embeds them.
#[test]
fn the_up_to_date_check_knows_refinerys_migrations() {
    use super::*;
    let runner = embedded::migrations::runner();
    // Embedded in file-name order (V10 before V2); refinery sorts them by version to run.
    let mut theirs: Vec<(i64, String, u64)> = runner
        .get_migrations()
        .iter()
        .map(|m| (i64::from(m.version()), m.name().to_string(), m.checksum()))
        .collect();
    theirs.sort();
    let ours: Vec<(i64, String, u64)> = embedded::MIGRATIONS
        .iter()
        .map(|&(v, n, sql)| (i64::from(v), n.to_string(), migration_checksum(v, n, sql)))
        .collect();
    assert_eq!(ours, theirs);
    // A migrated file is up to date; one whose history differs in any way is not.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sqlite");
    drop(Store::open(&path).unwrap());
    let conn = Connection::open(&path).unwrap();
    assert!(up_to_date(&conn));
    for change in [
            "UPDATE refinery_schema_history SET checksum = '1' WHERE version = 1",
            "UPDATE refinery_schema_history SET name = 'x' WHERE version = 2",
            "DELETE FROM refinery_schema_history WHERE version = (SELECT max(version) FROM refinery_schema_history)",
        ] {
            conn.execute_batch(&format!("BEGIN; {change}")).unwrap();
            assert!(!up_to_date(&conn), "{change}");
            conn.execute_batch("ROLLBACK").unwrap();
        }
    assert!(!up_to_date(&Connection::open_in_memory().unwrap()));
}

/// An I/O error is named once: prefixed when its message does not name the database, left
/// alone when it was built naming it (the open errors), and a non-I/O error is left alone.
#[test]
fn an_io_error_names_the_database_once() {
    use crate::error::{Error, ErrorCode};
    let path = std::path::Path::new("/tmp/x/threadbase.sqlite");
    let named = super::name_database(path, Error::io("disk full. Repair: free space."));
    assert_eq!(
        named.message,
        "Database /tmp/x/threadbase.sqlite: disk full. Repair: free space."
    );
    assert_eq!(super::name_database(path, named.clone()), named);
    let cant_open = open_error(
        path,
        rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
            None,
        ),
    );
    assert_eq!(cant_open.code, ErrorCode::Io);
    assert!(
        cant_open
            .message
            .starts_with("Cannot open the database /tmp/x/threadbase.sqlite: "),
        "{}",
        cant_open.message
    );
    assert_eq!(super::name_database(path, cant_open.clone()), cant_open);
    assert!(
        std::error::Error::source(&cant_open).is_some(),
        "keeps its cause"
    );
    let invalid = Error::invalid("bad");
    assert_eq!(super::name_database(path, invalid.clone()), invalid);
}

/// Contract A's list queries return the thread's id, path and status at the positions
/// `store::list` reads (the rest of a row is read by threads_by_ids).
#[test]
fn list_queries_return_the_listed_columns() {
    use crate::store::list::listed_col::{self, ID, PATH, STATUS};
    let dir = tempfile::tempdir().unwrap();
    let store = super::Store::open(dir.path().join("t.sqlite")).unwrap();
    let conn = store.read().unwrap();
    let queries = [
        include_str!("../../sql/list_all.sql"),
        include_str!("../../sql/list_children.sql"),
        include_str!("../../sql/list_descendants.sql"),
        include_str!("../../sql/list_all_live.sql"),
        include_str!("../../sql/list_all_archived.sql"),
        include_str!("../../sql/list_children_live.sql"),
        include_str!("../../sql/list_children_archived.sql"),
        include_str!("../../sql/list_descendants_live.sql"),
        include_str!("../../sql/list_descendants_archived.sql"),
        include_str!("../../sql/list_children_reach.sql"),
        include_str!("../../sql/list_descendants_reach.sql"),
    ];
    for sql in queries {
        let stmt = conn
            .sqlite()
            .unwrap()
            .prepare(&listed_col::expand(sql))
            .unwrap();
        assert_eq!(stmt.column_names(), ["id", "path", "status"], "{sql}");
    }
    assert_eq!([ID, PATH, STATUS], [0, 1, 2]);
}
