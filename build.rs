//! Rebuilds the crate when a migration changes: refinery embeds `migrations/` at compile time,
//! and cargo does not otherwise know the crate depends on those files.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
