//! Writing whole session files atomically and exclusively.
//!
//! Every file is first written in full to a hidden temporary file in the destination directory
//! (`.<name>.<8 hex>.tmp`, which Pi never mistakes for a session since it does not end in
//! `.jsonl`), flushed to disk, then hard-linked to the destination name. `link(2)` fails with
//! `EEXIST` instead of replacing, so the destination appears complete or not at all and an
//! existing file (another session, or a concurrent writer's) is never overwritten. The
//! temporary name is removed in every case. On a filesystem without hard links the fallback is a
//! `rename` after an existence check (atomic, but the no-clobber check is then not race-free).

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{path_text, resolve_path, SESSION_VERSION};
use crate::error::{Error, Result};

/// Writes a header-only session file at `path`:
/// `{"type":"session","version":3,"id":id,"timestamp":now,"cwd":cwd[,"parentSession":…]}`.
///
/// Used for a new child's session file created beforehand in the parent's session directory
/// with a `parentSession` link (contract A §1.7); `pi --session <path>` then keeps that header,
/// id included, and appends its own entries (pi-rpc.md §11). `cwd` and `parent_session` are
/// written as absolute, normalized paths. Missing parent directories are created; an existing
/// file at `path` is refused with a `conflict` error.
pub fn write_header_only(
    path: &Path,
    id: &str,
    cwd: &Path,
    parent_session: Option<&Path>,
) -> Result<()> {
    let header = header_value(
        id,
        Some(path_text(&resolve_path(cwd), "session cwd")?),
        parent_session,
    )?;
    write_new_file(path, &[header])
}

/// A version-3 session header stamped now. `parentSession` is left out when `None`.
pub(super) fn header_value(
    id: &str,
    cwd: Option<String>,
    parent_session: Option<&Path>,
) -> Result<Value> {
    if id.trim().is_empty() {
        return Err(Error::invalid(
            "A session id must not be empty. Repair: pass a fresh id such as session::uuid_v7().",
        ));
    }
    let mut header = json!({
        "type": "session",
        "version": SESSION_VERSION,
        "id": id,
        "timestamp": crate::time::now_iso(),
    });
    if let Some(cwd) = cwd {
        header["cwd"] = Value::from(cwd);
    }
    if let Some(parent) = parent_session {
        header["parentSession"] =
            Value::from(path_text(&resolve_path(parent), "parent session path")?);
    }
    Ok(header)
}

/// Writes `lines` (compact JSON, one per line, LF-terminated) to a new file at `path`,
/// atomically and without replacing an existing file. Creates missing parent directories.
pub(super) fn write_new_file(path: &Path, lines: &[Value]) -> Result<()> {
    let mut text = String::new();
    for line in lines {
        text.push_str(
            &serde_json::to_string(line)
                .map_err(|e| Error::internal(format!("Cannot serialize a session entry: {e}")))?,
        );
        text.push('\n');
    }
    write_new_bytes(path, text.as_bytes())
}

fn exists_error(path: &Path) -> Error {
    Error::conflict(format!(
        "Session file already exists: {}. Repair: choose a new file name (a fresh session id), or move the existing file aside if it is stale.",
        path.display()
    ))
}

fn io_error(path: &Path, action: &str, e: std::io::Error) -> Error {
    Error::io(format!(
        "Cannot {action} {}: {e}. Repair: check that the directory exists, is writable and has free space.",
        path.display()
    ))
}

/// Removes the temporary file when dropped, whatever happened.
struct TempGuard(PathBuf);

impl Drop for TempGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn write_new_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Err(Error::invalid(format!(
            "A session file path must end in a UTF-8 file name: {}. Repair: pass a path such as <dir>/<timestamp>_<id>.jsonl.",
            path.display()
        )));
    };
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, "create directory", e))?;
    if std::fs::symlink_metadata(path).is_ok() {
        return Err(exists_error(path));
    }

    let temp = dir.join(format!(".{name}.{}.tmp", crate::ids::random_hex(8)));
    let guard = TempGuard(temp.clone());
    {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| io_error(&temp, "create", e))?;
        file.write_all(bytes)
            .map_err(|e| io_error(&temp, "write", e))?;
        file.sync_all().map_err(|e| io_error(&temp, "flush", e))?;
    }
    match std::fs::hard_link(&temp, path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(exists_error(path)),
        Err(_) => {
            // No hard links here (some network or FUSE filesystems): rename instead.
            if std::fs::symlink_metadata(path).is_ok() {
                return Err(exists_error(path));
            }
            std::fs::rename(&temp, path).map_err(|e| io_error(path, "create", e))?;
        }
    }
    drop(guard);
    // Make the new directory entry durable too (best effort: not every platform allows it).
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
