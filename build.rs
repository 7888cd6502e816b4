//! Two things cargo does not know by itself:
//! - refinery embeds `migrations/` at compile time, so the crate rebuilds when one changes;
//! - `$OUT_DIR/migrations.rs` lists the same files as `(version, name, sql)`, in version
//!   order, for `store`'s check that a database is already up to date (no refinery runner).

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    write_migrations_list();
}

/// `$OUT_DIR/migrations.rs`: `MIGRATIONS: &[(i32, &str, &str)]`, every `migrations/V<n>__<name>.sql`
/// as (n, name, its text), sorted by n.
fn write_migrations_list() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
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
