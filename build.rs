//! Four things cargo does not know by itself:
//! - refinery embeds `migrations/` and `migrations_postgres/` at compile time, so the crate
//!   rebuilds when one changes;
//! - `$OUT_DIR/migrations.rs` lists the same files as `(version, name, sql)`, in version
//!   order, for `store`'s check that a database is already up to date (no refinery runner);
//! - `THREADBASE_SHAPE` names this build's rendering of closed threads' answers (the
//!   `thread_snapshots` cache, migration V8): a hash of everything that can change a rendered
//!   byte (the crate's source, its queries and its locked dependencies). A build reads only
//!   cache rows of its own shape, so no change to the code can serve an older shape;
//! - `$OUT_DIR/queries.rs` lists every query of `sql/` with its PostgreSQL override from
//!   `sql/postgres/`, if any (`store::postgres::queries`).

use std::hash::Hasher;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=migrations_postgres");
    for dir in ["src", "sql"] {
        println!("cargo:rerun-if-changed={dir}");
    }
    println!("cargo:rerun-if-changed=Cargo.lock");
    let mut files = Vec::new();
    for dir in ["src", "sql", "migrations", "migrations_postgres"] {
        collect(Path::new(dir), &mut files);
    }
    files.push(PathBuf::from("Cargo.lock"));
    files.sort();
    // FNV-1a, 64 bits: stable across Rust versions (unlike std's DefaultHasher).
    let mut h = Fnv(0xcbf2_9ce4_8422_2325);
    h.write(env!("CARGO_PKG_VERSION").as_bytes());
    for f in &files {
        h.write(f.to_string_lossy().as_bytes());
        h.write(&[0]);
        h.write(&std::fs::read(f).unwrap_or_default());
        h.write(&[0]);
    }
    println!("cargo:rustc-env=THREADBASE_SHAPE={:016x}", h.finish());
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

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else {
            out.push(p);
        }
    }
}

struct Fnv(u64);

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
