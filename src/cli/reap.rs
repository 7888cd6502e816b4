//! `threadbase reap [--dry-run]`: contract B's reap for every main session in the database.
//! Each registry forgets, in one transaction, its completed threads with no descendant that
//! stays (the rows stay, marked reaped, for SQL and `usage`; session files stay). A settled
//! process not yet retired ends by itself when its serve retires it.

use std::io::Write;
use std::path::Path;

use crate::error::Result;
use crate::store::agents::reap;
use crate::time::now_iso;

pub fn run(db: &Path, dry_run: bool, json: bool, out: &mut dyn Write) -> Result<()> {
    let store = crate::Store::open_existing(db)?;
    let registries = {
        let conn = store.read()?;
        reap::registries(&conn)?
    };
    let at = now_iso();
    let mut found: Vec<(String, String)> = Vec::new();
    for r in registries {
        let reaped = store.write(|tx| reap::reap(tx, r.id, &at, dry_run))?;
        found.extend(reaped.into_iter().map(|t| (r.session_id.clone(), t.path)));
    }
    if json {
        let threads: Vec<_> = found
            .iter()
            .map(|(session, path)| serde_json::json!({"session": session, "path": path}))
            .collect();
        let doc = serde_json::json!({"dryRun": dry_run, "count": found.len(), "threads": threads});
        writeln!(out, "{doc}")?;
        return Ok(());
    }
    let n = found.len();
    let plural = if n == 1 { "" } else { "s" };
    if dry_run {
        writeln!(out, "would reap {n} completed thread{plural}")?;
    } else {
        writeln!(out, "reaped {n} completed thread{plural}")?;
    }
    for (session, path) in &found {
        writeln!(out, "  {path}  (session {session})")?;
    }
    Ok(())
}
