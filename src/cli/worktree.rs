//! `threadbase diff`, `merge`, `worktree list` and `worktree clean` (issue 48): the isolated
//! threads' worktrees, reviewed, merged and removed (`engine::review`), printed.

use std::io::Write;
use std::path::Path;

use serde_json::json;

use crate::engine::review::{self, CleanArgs};
use crate::error::Result;
use crate::store::Store;

pub fn diff(db: &Path, reference: &str, stat: bool, out: &mut dyn Write) -> Result<()> {
    let store = Store::open_existing(db)?;
    let text = review::diff(&store, reference, stat)?;
    out.write_all(text.as_bytes())?;
    Ok(())
}

pub fn merge(
    db: &Path,
    reference: &str,
    squash: bool,
    as_json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let store = Store::open_existing(db)?;
    let m = review::merge(&store, reference, squash)?;
    if as_json {
        writeln!(out, "{}", json!({ "merged": m }))?;
    } else {
        writeln!(out, "{}", review::merge_text(&m))?;
    }
    Ok(())
}

pub fn list(db: &Path, as_json: bool, out: &mut dyn Write) -> Result<()> {
    // Read-only: a read never writes, nor checkpoints the WAL on its way out.
    let items = review::list(&crate::store::open_read_only(db)?)?;
    if as_json {
        writeln!(out, "{}", json!({ "worktrees": items }))?;
    } else {
        writeln!(out, "{}", review::list_text(&items))?;
    }
    Ok(())
}

pub fn clean(db: &Path, args: &CleanArgs<'_>, as_json: bool, out: &mut dyn Write) -> Result<()> {
    let store = Store::open_existing(db)?;
    let items = review::clean(&store, args)?;
    if as_json {
        writeln!(out, "{}", json!({ "worktrees": items }))?;
    } else {
        writeln!(out, "{}", review::clean_text(&items))?;
    }
    Ok(())
}
