//! The store is the one boundary to the database: no file of `src/` outside `src/store/`
//! names `rusqlite`, and none calls `Conn::sqlite` (the hand-made rows of tests and benches)
//! outside its unit tests.

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

/// The files of `src/` outside `src/store/`, each with its text before its unit tests (a
/// file's own `#[cfg(test)]` part, or its `<file>/tests.rs`, which is not code of the crate).
fn outside_the_store() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files
        .into_iter()
        .filter(|p| !p.starts_with(root.join("src/store")))
        .filter(|p| !p.ends_with("tests.rs"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let code = match text.find("#[cfg(test)]") {
                Some(i) => text[..i].to_string(),
                None => text,
            };
            (p.strip_prefix(root).unwrap().display().to_string(), code)
        })
        .collect()
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
