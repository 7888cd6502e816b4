//! Pi session files (`shared/reference/pi-rpc.md` §10–12): where they live, how to read them,
//! and the files the host writes itself before it launches `pi --session <file>`.
//!
//! A session file is JSON Lines: line 1 is the header
//! `{"type":"session","version":3,"id":…,"timestamp":…,"cwd":…,"parentSession"?:…}`, every
//! later line an entry `{type, id, parentId, timestamp, …}`. Entries form a tree through
//! `parentId`; on load Pi takes the **last entry in file order** as the leaf.
//!
//! What this module writes (all compact JSON, one object per line, LF; missing parent
//! directories are created; a file is written to a temporary file beside it and then linked into
//! place, so a crash never leaves a partial session file and an existing file is never
//! replaced — see [`write`]):
//!
//! - [`write_header_only`]: a new child's session file, created beforehand with a
//!   `parentSession` link (contract A §1.7).
//! - [`write_branch`]: a host-built branch of a source session (contract A `fork`, pi-rpc §12).
//! - [`write_inherited_context`] / [`write_subagent_session`]: a contract B child transcript
//!   seeded from a frozen snapshot of its lexical parent's branch (§2.5, §2.10).
//!
//! Reading ([`SessionFile::read`]) is tolerant the way Pi is where that is harmless (blank lines,
//! a torn final line without its LF, later `session` lines), and strict where silently skipping
//! would lose conversation (a malformed complete line is an error naming the file and line).

mod branch;
mod inherit;
mod write;

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::error::{Error, ErrorCode, Result};

pub use branch::{write_branch, BranchInfo, ForkPosition};
pub use inherit::{
    inherited_entries, write_inherited_context, write_subagent_session, OWNERSHIP_CUSTOM_TYPE,
};
pub use write::write_header_only;

/// The session format version this module writes (Pi 1.6's `CURRENT_SESSION_VERSION`).
pub const SESSION_VERSION: u64 = 3;

// ---------------------------------------------------------------------------------------------
// Ids and names
// ---------------------------------------------------------------------------------------------

/// A fresh RFC 9562 UUIDv7 (48 bits of Unix milliseconds, then random bits), lowercase and
/// hyphenated, as Pi writes session ids.
pub fn uuid_v7() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A random RFC 9562 UUIDv4 (Pi's fallback entry id after 100 colliding 8-hex ids).
fn uuid_v4() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A new entry id as Pi makes them (`generateId`): 8 lowercase hex digits not in use yet
/// (`taken` answers that), a full UUID after 100 collisions.
pub fn new_entry_id(taken: impl Fn(&str) -> bool) -> String {
    for _ in 0..100 {
        let id = crate::ids::random_hex(8);
        if !taken(&id) {
            return id;
        }
    }
    uuid_v4()
}

/// Pi's default session directory for `cwd` (pi-rpc.md §10.1):
/// `<agentDir>/sessions/--<encoded cwd>--`. Both paths are first made absolute and lexically
/// normalized (like Node's `path.resolve`: `.` and `..` folded, no symlinks resolved); the cwd is
/// encoded by dropping its leading `/` (or `\`) and turning every `/`, `\` and `:` into `-`, so
/// `/home/ada/proj` becomes `--home-ada-proj--`.
pub fn session_dir_for(agent_dir: &Path, cwd: &Path) -> PathBuf {
    let cwd = resolve_path(cwd).to_string_lossy().into_owned();
    let trimmed = cwd
        .strip_prefix('/')
        .or_else(|| cwd.strip_prefix('\\'))
        .unwrap_or(&cwd);
    let encoded: String = trimmed
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    resolve_path(agent_dir)
        .join("sessions")
        .join(format!("--{encoded}--"))
}

/// Pi's session file name: `<ISO timestamp with ':' and '.' replaced by '-'>_<sessionId>.jsonl`,
/// e.g. `2026-11-30T00-21-41-191Z_01a229d4-2ec6-7434-9546-40b802397527.jsonl`.
pub fn session_file_name(now_iso: &str, session_id: &str) -> String {
    let stamp: String = now_iso
        .chars()
        .map(|c| if matches!(c, ':' | '.') { '-' } else { c })
        .collect();
    format!("{stamp}_{session_id}.jsonl")
}

/// `path` made absolute against the process cwd and lexically normalized (Node's
/// `path.resolve`): `.` dropped, `..` pops a component (never above the root), no symlinks
/// followed, no trailing separator.
pub fn resolve_path(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    let mut out = PathBuf::new();
    for component in joined.components() {
        match component {
            Component::Prefix(_) | Component::RootDir | Component::Normal(_) => {
                out.push(component.as_os_str())
            }
            Component::CurDir => {}
            Component::ParentDir => {
                // `pop` refuses to remove the root, which is what `path.resolve` does too.
                if out.parent().is_some() {
                    out.pop();
                }
            }
        }
    }
    out
}

/// `path` as UTF-8 text for a JSON field, or an `invalid_params` error naming `what`.
fn path_text(path: &Path, what: &str) -> Result<String> {
    path.to_str().map(str::to_string).ok_or_else(|| {
        Error::invalid(format!(
            "The {what} is not valid UTF-8: {}. Repair: use a path made of UTF-8 characters.",
            path.display()
        ))
    })
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

/// A parsed Pi session file: the header and the entries in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionFile {
    /// The path the file was read from (as given).
    pub path: PathBuf,
    /// Line 1: `{"type":"session","version":3,"id":…,…}`.
    pub header: Value,
    /// Every later entry, in file order (blank lines, a torn final line and repeated `session`
    /// header lines are not included).
    pub entries: Vec<Value>,
}

/// The text of a message's `content`: the string itself, or its text parts joined by `sep`;
/// `None` for any other shape.
pub fn content_text(content: &Value, sep: &str) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join(sep),
        ),
        _ => None,
    }
}

impl SessionFile {
    /// Reads and parses `path`.
    ///
    /// - A missing file is an error with code [`ErrorCode::NotResumable`] (message
    ///   `Pi session file does not exist: <path>. Repair: …`); callers that resume add their own
    ///   wording, e.g. `Cannot resume managed thread: saved Pi session file does not exist: …`.
    /// - Blank lines are skipped. A final line without its LF that is not valid JSON is a torn
    ///   append (a writer died mid-line) and is ignored, as Pi ignores it.
    /// - Any other line that is not a JSON object, a first line that is not a session header
    ///   with a string `id`, and an entry without a string `type` and `id` are `io` errors that
    ///   name the file and the 1-based line, with a `Repair:` hint.
    /// - Version 1 files (no entry ids) are refused; version 2 files are read with Pi's v2→v3
    ///   migration applied in memory (`hookMessage` role → `custom`).
    pub fn read(path: impl AsRef<Path>) -> Result<SessionFile> {
        let path = path.as_ref();
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::new(
                    ErrorCode::NotResumable,
                    format!(
                        "Pi session file does not exist: {}. Repair: check the path, or start a new session instead of resuming this one.",
                        path.display()
                    ),
                ))
            }
            Err(e) => {
                return Err(Error::io(format!(
                    "Cannot read Pi session file {}: {e}. Repair: check that the file exists and is readable.",
                    path.display()
                )))
            }
        };
        // Pi decodes with a StringDecoder, which replaces invalid UTF-8 the same way.
        let text = String::from_utf8_lossy(&bytes);
        let corrupt = |line: usize, what: String| {
            Error::io(format!(
                "Cannot read Pi session file {} line {line}: {what}. Repair: fix or delete that line (Pi skips malformed lines), or restore the file from a backup.",
                path.display()
            ))
        };

        let mut header: Option<Value> = None;
        let mut entries = Vec::new();
        let segments: Vec<&str> = text.split('\n').collect();
        let last = segments.len() - 1; // the text after the final LF ("" when it ends with LF)
        for (index, raw) in segments.iter().enumerate() {
            let line_no = index + 1;
            if raw.trim().is_empty() {
                continue;
            }
            let value: Value = match serde_json::from_str(raw) {
                Ok(v) => v,
                Err(_) if index == last => break, // torn final line
                Err(e) => return Err(corrupt(line_no, format!("not valid JSON ({e})"))),
            };
            if !value.is_object() {
                return Err(corrupt(line_no, "not a JSON object".into()));
            }
            if header.is_none() {
                if value["type"] != "session" || !value["id"].is_string() {
                    return Err(corrupt(
                        line_no,
                        "the first line is not a Pi session header ({\"type\":\"session\",\"id\":…})"
                            .into(),
                    ));
                }
                header = Some(value);
                continue;
            }
            if value["type"] == "session" {
                // Pi skips repeated headers when it indexes entries.
                continue;
            }
            if !value["type"].is_string() || !value["id"].is_string() {
                return Err(corrupt(
                    line_no,
                    "the entry has no string \"type\" and \"id\"".into(),
                ));
            }
            entries.push(value);
        }
        let Some(header) = header else {
            return Err(Error::io(format!(
                "Pi session file {} has no session header (it is empty). Repair: delete it so Pi can create it, or restore it from a backup.",
                path.display()
            )));
        };
        let version = header["version"].as_u64().unwrap_or(1);
        if version < 2 {
            return Err(Error::io(format!(
                "Pi session file {} uses session format version {version}, whose entries have no ids. Repair: open it once with Pi (it migrates the file to version {SESSION_VERSION}), then retry.",
                path.display()
            )));
        }
        if version < 3 {
            for entry in &mut entries {
                if entry["type"] == "message" && entry["message"]["role"] == "hookMessage" {
                    entry["message"]["role"] = Value::from("custom");
                }
            }
        }
        Ok(SessionFile {
            path: path.to_path_buf(),
            header,
            entries,
        })
    }

    /// The header `id` (the session id); `""` if the header was changed to lack one.
    pub fn header_id(&self) -> &str {
        self.header["id"].as_str().unwrap_or("")
    }

    /// The header `cwd`, if any.
    pub fn cwd(&self) -> Option<&str> {
        self.header["cwd"].as_str()
    }

    /// The header `parentSession`, if any.
    pub fn parent_session(&self) -> Option<&str> {
        self.header["parentSession"].as_str()
    }

    /// The leaf Pi resumes at: the id of the last entry in file order (`None`: header only).
    pub fn leaf_id(&self) -> Option<&str> {
        self.entries.last().and_then(|e| e["id"].as_str())
    }

    /// The entry with `id` (the last one in file order if an id repeats, as Pi's index does).
    pub fn entry(&self, id: &str) -> Option<&Value> {
        self.entries.iter().rev().find(|e| e["id"] == id)
    }

    /// The entries from the root to `id` inclusive, following `parentId` (Pi's `getBranch`).
    /// Empty when `id` is unknown; stops early at a `parentId` that names no entry; a `parentId`
    /// cycle is cut where it closes.
    pub fn path_to(&self, id: &str) -> Vec<&Value> {
        let index = self.index();
        let mut path = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut current = index.get(id).copied();
        while let Some(entry) = current {
            let Some(entry_id) = entry["id"].as_str() else {
                break;
            };
            if !seen.insert(entry_id) {
                break;
            }
            path.push(entry);
            current = entry["parentId"]
                .as_str()
                .and_then(|p| index.get(p).copied());
        }
        path.reverse();
        path
    }

    /// The current branch: root → [`leaf_id`](Self::leaf_id) (empty for a header-only file).
    pub fn branch(&self) -> Vec<&Value> {
        match self.leaf_id() {
            Some(leaf) => self.path_to(leaf),
            None => Vec::new(),
        }
    }

    /// The session name: the `name` of the last `session_info` entry in file order (an empty
    /// name clears it), as Pi's `getSessionName`.
    pub fn session_name(&self) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find(|e| e["type"] == "session_info")
            .and_then(|e| e["name"].as_str())
            .map(str::trim)
            .filter(|n| !n.is_empty())
    }

    /// The text of the first user message in file order (what Pi's session list shows for a
    /// session without a name).
    pub fn first_user_text(&self) -> Option<String> {
        let msg = self
            .entries
            .iter()
            .find(|e| e["type"] == "message" && e["message"]["role"] == "user")?;
        content_text(&msg["message"]["content"], " ").filter(|t| !t.trim().is_empty())
    }

    /// id → entry; a later duplicate wins, as in Pi's `byId` map.
    fn index(&self) -> HashMap<&str, &Value> {
        self.entries
            .iter()
            .filter_map(|e| Some((e["id"].as_str()?, e)))
            .collect()
    }
}

/// What a session is called, read without parsing the whole file: the name of its last
/// `session_info` entry (an empty name clears it, as [`SessionFile::session_name`]) and the text
/// of its first user message (as [`SessionFile::first_user_text`]). Only the lines that can be
/// one of those are parsed, so a long session costs a read and a scan, not a JSON parse of
/// every message: the inspection commands and `top` call this for every root session.
pub fn session_title_parts(path: &Path) -> Result<(Option<String>, Option<String>)> {
    let bytes = std::fs::read(path).map_err(|e| {
        Error::io(format!(
            "Cannot read Pi session file {}: {e}. Repair: check that the file exists and is readable.",
            path.display()
        ))
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let mut name: Option<String> = None;
    let mut first_user: Option<String> = None;
    for line in text.split('\n').skip(1) {
        let maybe_info = line.contains("\"session_info\"");
        let maybe_user = first_user.is_none() && line.contains("\"user\"");
        if !maybe_info && !maybe_user {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue; // a torn or malformed line, which Pi skips too
        };
        if v["type"] == "session_info" {
            name = v["name"]
                .as_str()
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string);
        } else if maybe_user && v["type"] == "message" && v["message"]["role"] == "user" {
            first_user = Some(
                content_text(&v["message"]["content"], " ")
                    .filter(|t| !t.trim().is_empty())
                    .unwrap_or_default(),
            );
        }
    }
    Ok((name, first_user.filter(|t| !t.is_empty())))
}

#[cfg(test)]
mod tests;
