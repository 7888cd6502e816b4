//! Every `threadbase sql` example in the README and the docs/ pages runs: the demo database is
//! built with `threadbase demo --keep`, then each example statement is run through the binary
//! and must succeed. Keeps the pages' SQL true as the schema changes.

use std::path::Path;
use std::process::Command;

/// The README and the docs/ pages.
fn pages() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = vec![root.join("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect()
}

/// The statements of every `threadbase sql "…"` line in the pages' code blocks, a statement
/// continuing over lines until its closing quote.
fn readme_statements() -> Vec<String> {
    let mut out = Vec::new();
    for page in pages() {
        statements_of(&page, &mut out);
    }
    out
}

fn statements_of(readme: &str, out: &mut Vec<String>) {
    let mut in_code = false;
    let mut open: Option<String> = None;
    for line in readme.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !in_code {
            continue;
        }
        if let Some(mut text) = open.take() {
            text.push(' ');
            text.push_str(line.trim());
            match text.rfind('"') {
                Some(end) if end > 0 => out.push(text[..end].to_string()),
                _ => open = Some(text),
            }
            continue;
        }
        let Some(at) = line.find("threadbase sql ") else {
            continue;
        };
        let rest = line[at + "threadbase sql ".len()..].trim_start();
        let rest = rest
            .trim_start_matches("--json ")
            .trim_start_matches("--timeout 5 ");
        let Some(body) = rest.strip_prefix('"') else {
            continue;
        };
        match body.find('"') {
            Some(end) => out.push(body[..end].to_string()),
            None => open = Some(body.to_string()),
        }
    }
    assert!(
        open.is_none(),
        "an unterminated threadbase sql example: {open:?}"
    );
}

#[test]
fn every_threadbase_sql_example_in_the_readme_and_docs_runs_against_the_demo_database() {
    let statements = readme_statements();
    assert!(
        statements.len() >= 4,
        "expected the pages' SQL examples, found {statements:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.sqlite");
    let demo = Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("demo")
        .arg("--keep")
        .arg(&db)
        .env("TMPDIR", dir.path())
        .output()
        .unwrap();
    assert!(
        demo.status.success(),
        "demo failed: {}",
        String::from_utf8_lossy(&demo.stderr)
    );
    for statement in &statements {
        let out = Command::new(env!("CARGO_BIN_EXE_threadbase"))
            .arg("--db")
            .arg(&db)
            .args(["sql", statement])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "README example failed: threadbase sql {statement:?}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
