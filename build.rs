//! Three things cargo does not know by itself:
//! - refinery embeds `migrations/` and `migrations_postgres/` at compile time, so the crate
//!   rebuilds when one changes;
//! - `$OUT_DIR/migrations.rs` lists the same files as `(version, name, sql)`, in version
//!   order, for `store`'s check that a database is already up to date (no refinery runner);
//! - `$OUT_DIR/queries.rs` lists every query of `sql/` with its PostgreSQL override from
//!   `sql/postgres/`, if any (`store::postgres::queries`).

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=migrations_postgres");
    println!("cargo:rerun-if-changed=sql");
    write_migrations_list();
    write_queries_list();
}

/// The package's folder, read when the script runs: `env!` would keep the folder the script
/// was compiled in, and a target folder copied from another worktree reuses that compiled
/// script (its source is the same), which would then list and include the other worktree's
/// `sql/` and `migrations/`.
fn manifest_dir() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
}

/// `$OUT_DIR/queries.rs`: `QUERIES: &[Query]`, every `sql/<name>.sql` sorted by name with its
/// text and, when `sql/postgres/<name>.sql` exists, that text; and `OVERRIDES: &[&str]`, the
/// names of every file of `sql/postgres/` (one without a base file is what
/// `store::postgres::queries::orphan_overrides` finds).
fn write_queries_list() {
    let sql = manifest_dir().join("sql");
    let names = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| {
                        let path = e.path();
                        (path.is_file() && path.extension()? == "sql")
                            .then(|| path.file_stem()?.to_str().map(str::to_owned))?
                    })
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };
    let overrides = names(&sql.join("postgres"));
    let mut out = String::from("pub static QUERIES: &[Query] = &[\n");
    for name in names(&sql) {
        let base = sql.join(format!("{name}.sql")).display().to_string();
        let pg = if overrides.contains(&name) {
            let path = sql.join("postgres").join(format!("{name}.sql"));
            format!("Some(include_str!({:?}))", path.display().to_string())
        } else {
            "None".to_string()
        };
        out.push_str(&format!(
            "    Query {{ name: {name:?}, sqlite: include_str!({base:?}), override_text: {pg} }},\n"
        ));
    }
    out.push_str("];\npub static OVERRIDES: &[&str] = &[\n");
    for name in &overrides {
        out.push_str(&format!("    {name:?},\n"));
    }
    out.push_str("];\n");
    let target = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("queries.rs");
    std::fs::write(target, out).expect("write queries.rs");
}

/// `$OUT_DIR/migrations.rs`: `MIGRATIONS: &[(i32, &str, &str)]`, every `migrations/V<n>__<name>.sql`
/// as (n, name, its text), sorted by n.
fn write_migrations_list() {
    let dir = manifest_dir().join("migrations");
    let mut list: Vec<(i32, String, PathBuf)> = std::fs::read_dir(&dir)
        .expect("migrations/")
        .flatten()
        .filter_map(|e| {
            let path = e.path();
            let stem = path.file_stem()?.to_str()?.to_string();
            let (version, name) = stem.strip_prefix('V')?.split_once("__")?;
            Some((version.parse().ok()?, name.to_string(), path))
        })
        .collect();
    list.sort();
    let mut out = String::from("pub const MIGRATIONS: &[(i32, &str, &str)] = &[\n");
    for (version, name, path) in &list {
        out.push_str(&format!(
            "    ({version}, {name:?}, include_str!({:?})),\n",
            path.display().to_string()
        ));
    }
    out.push_str("];\n");
    let target = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("migrations.rs");
    std::fs::write(target, out).expect("write migrations.rs");
}
