//! The store is the one boundary to the database: no file of `src/` outside `src/store/`
//! names `rusqlite`, and none calls `Conn::sqlite` (the hand-made rows of tests and benches)
//! outside its unit tests. Inside it, each backend has its room: PostgreSQL's driver is named
//! only in `src/store/postgres/`, SQLite's in `src/store/sqlite/` and the few store files that
//! read SQLite's cursors themselves, and neither room reaches into the other.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The files of `src/` outside `src/store/`, as [`code_of`] gives them.
fn outside_the_store() -> Vec<(String, String)> {
    code_of("src/")
        .into_iter()
        .filter(|(p, _)| !p.starts_with("src/store/"))
        .collect()
}

/// Every file of `src/` under `room` (a prefix of its path), each with its code before its
/// unit tests and without its comment lines.
fn code_of(room: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files
        .into_iter()
        .filter(|p| !p.ends_with("tests.rs"))
        .map(|p| (p.strip_prefix(root).unwrap().display().to_string(), p))
        .filter(|(shown, _)| shown.starts_with(room))
        .map(|(shown, p)| {
            let text = std::fs::read_to_string(&p).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap();
            let code: Vec<&str> = code
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect();
            (shown, code.join("\n"))
        })
        .collect()
}

/// The files of `src/` that name `word` in their code, outside the rooms `allowed`.
fn naming(word: &str, allowed: &[&str]) -> Vec<String> {
    code_of("src/")
        .into_iter()
        .filter(|(p, code)| code.contains(word) && !allowed.iter().any(|a| p.starts_with(a)))
        .map(|(p, _)| p)
        .collect()
}

#[test]
fn only_the_postgres_room_names_the_postgres_driver() {
    let naming = naming("tokio_postgres", &["src/store/postgres/"]);
    assert!(naming.is_empty(), "outside src/store/postgres/: {naming:?}");
}

/// rusqlite's name stays in `store/sqlite/`, but for the store files that step SQLite's own
/// cursors or statements: a list's merge of two cursors (`list.rs`), `threadbase sql`'s
/// statement and its interrupting watchdog (`adhoc.rs`), the ids' rusqlite conversions for the
/// tests' hand-written SQL (`values.rs`), and the agent row's error for an unreadable state
/// (`agents/mod.rs`). The list does not grow.
#[test]
fn only_the_sqlite_room_and_the_listed_store_files_name_rusqlite() {
    let naming = naming(
        "rusqlite",
        &[
            "src/store/sqlite/",
            "src/store/list.rs",
            "src/store/adhoc.rs",
            "src/store/values.rs",
            "src/store/agents/mod.rs",
        ],
    );
    assert!(naming.is_empty(), "outside src/store/sqlite/: {naming:?}");
}

/// `store/sqlite/` and `store/postgres/` are siblings: neither imports the other.
#[test]
fn the_backends_rooms_do_not_reach_into_each_other() {
    let crossing: Vec<String> = code_of("src/store/sqlite/")
        .into_iter()
        .filter(|(_, code)| code.contains("postgres::"))
        .chain(
            code_of("src/store/postgres/")
                .into_iter()
                .filter(|(_, code)| code.contains("sqlite::")),
        )
        .map(|(p, _)| p)
        .collect();
    assert!(crossing.is_empty(), "{crossing:?}");
}

#[test]
fn no_file_outside_the_store_names_the_database_crate() {
    let naming: Vec<String> = outside_the_store()
        .into_iter()
        .filter(|(_, code)| code.contains("rusqlite"))
        .map(|(p, _)| p)
        .collect();
    assert!(naming.is_empty(), "outside src/store/: {naming:?}");
}

#[test]
fn no_code_outside_the_store_reaches_for_the_sqlite_connection() {
    let reaching: Vec<String> = outside_the_store()
        .into_iter()
        .filter(|(_, code)| code.contains(".sqlite()"))
        .map(|(p, _)| p)
        .collect();
    assert!(reaching.is_empty(), "outside src/store/: {reaching:?}");
}

/// A `<file>/tests.rs` is a unit-test module: its file declares it only under `#[cfg(test)]`.
#[test]
fn every_tests_rs_is_a_unit_test_module() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for p in files.iter().filter(|p| p.ends_with("tests.rs")) {
        let dir = p.parent().unwrap();
        let owner = [dir.with_extension("rs"), dir.join("mod.rs")]
            .into_iter()
            .find(|f| f.exists())
            .unwrap_or_else(|| panic!("{p:?} has no file that declares it"));
        let text = std::fs::read_to_string(&owner).unwrap();
        assert!(
            text.contains("#[cfg(test)]\nmod tests;"),
            "{owner:?} must declare {p:?} as `#[cfg(test)] mod tests;`"
        );
    }
}
