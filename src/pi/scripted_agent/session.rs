//! The scripted agent's session file, written as Pi 1.6 writes its own, so that what the host
//! reads back (usage, forks, resumes) is tested against the same shapes.
//!
//! Session file (version 3, §10–11): a missing file is created at exactly that path (parents
//! too) with exclusive create, lazily, when the first user or assistant message exists; buffered
//! entries are `model_change`, `thinking_level_change`, `session_info` (for `--name`), the system
//! message, then messages. An existing file is kept as written (host-written headers with any
//! `id`/`parentSession` included): the header id becomes the session id, its `cwd` the session
//! cwd (exit 1 if the directory is gone), the last entry in file order is the leaf, messages on
//! the leaf's path are the context, and new entries are appended with 8-hex ids chained by
//! `parentId` (`session_info` for `--name`, `thinking_level_change`/`model_change` only if the
//! path has none).

use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::args::Args;
use super::script::Script;
use super::write_stderr;
use crate::pi::session;

pub(super) struct Session {
    pub(super) id: String,
    pub(super) file: Option<PathBuf>,
    pub(super) cwd: String,
    pub(super) name: Option<String>,
    pub(super) entries: Vec<Value>,
    ids: HashSet<String>,
    pub(super) leaf: Option<String>,
    /// Messages on the leaf's path: the agent's context.
    pub(super) messages: Vec<Value>,
    /// Open for appending once the file exists on disk.
    pub(super) writer: Option<File>,
    /// Lines written before the file exists (lazy creation of a new session).
    pending: Vec<String>,
    /// The file exists but is empty: write it like a new one.
    reuse_empty: bool,
    pub(super) write_failed: bool,
}

impl Session {
    pub(super) fn open(args: &Args, script: &Script) -> std::result::Result<Session, String> {
        let process_cwd = std::env::current_dir()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "/".into());
        let file = if args.no_session {
            None
        } else {
            args.session.as_ref().map(|s| {
                let p = PathBuf::from(s);
                if p.is_absolute() {
                    p
                } else {
                    Path::new(&process_cwd).join(p)
                }
            })
        };
        let mut session = Session {
            id: String::new(),
            file: file.clone(),
            cwd: process_cwd,
            name: None,
            entries: Vec::new(),
            ids: HashSet::new(),
            leaf: None,
            messages: Vec::new(),
            writer: None,
            pending: Vec::new(),
            reuse_empty: false,
            write_failed: false,
        };
        let existing = match &file {
            Some(p) => match std::fs::read(p) {
                Ok(bytes) if bytes.iter().any(|b| !b.is_ascii_whitespace()) => Some(bytes),
                Ok(_) => {
                    session.reuse_empty = true;
                    None
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => {
                    return Err(format!(
                        "Error: Cannot read session file {}: {e}",
                        p.display()
                    ))
                }
            },
            None => None,
        };
        if let (Some(bytes), Some(path)) = (existing, &file) {
            session.load(path, &bytes)?;
            let mut f = OpenOptions::new()
                .read(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("Error: Cannot open session file {}: {e}", path.display()))?;
            if !bytes.ends_with(b"\n") {
                let _ = f.seek(SeekFrom::End(0));
                let _ = f.write_all(b"\n");
            }
            session.writer = Some(f);
        } else {
            session.id = args
                .session_id
                .clone()
                .or_else(|| script.session_id.clone())
                .unwrap_or_else(session::uuid_v7);
            let header = json!({
                "type": "session",
                "version": session::SESSION_VERSION,
                "id": session.id,
                "timestamp": crate::time::now_iso(),
                "cwd": session.cwd,
            });
            session.pending.push(header.to_string());
        }
        Ok(session)
    }

    /// Loads an existing session file: header, entries, leaf and the context on the leaf's path.
    fn load(&mut self, path: &Path, bytes: &[u8]) -> std::result::Result<(), String> {
        let text = String::from_utf8_lossy(bytes);
        let mut lines = text.split('\n').filter(|l| !l.trim().is_empty());
        let header: Value = lines
            .next()
            .and_then(|l| serde_json::from_str(l.trim_end_matches('\r')).ok())
            .filter(|h: &Value| h.get("type").and_then(Value::as_str) == Some("session"))
            .ok_or_else(|| {
                format!(
                    "Error: Invalid session file {}: the first line is not a session header",
                    path.display()
                )
            })?;
        self.id = header
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if let Some(cwd) = header.get("cwd").and_then(Value::as_str) {
            if !Path::new(cwd).is_dir() {
                return Err(format!(
                    "Error: Stored session working directory does not exist: {cwd}"
                ));
            }
            self.cwd = cwd.to_string();
        }
        for line in lines {
            // Pi skips lines it cannot parse.
            let Ok(entry) = serde_json::from_str::<Value>(line.trim_end_matches('\r')) else {
                continue;
            };
            if !entry.is_object() {
                continue;
            }
            if let Some(id) = entry.get("id").and_then(Value::as_str) {
                self.ids.insert(id.to_string());
                self.leaf = Some(id.to_string());
            }
            self.entries.push(entry);
        }
        let path_entries = self.path_to_leaf();
        for e in &path_entries {
            match e.get("type").and_then(Value::as_str) {
                Some("message") => {
                    if let Some(m) = e.get("message") {
                        self.messages.push(m.clone());
                    }
                }
                Some("session_info") => {
                    self.name = e
                        .get("name")
                        .and_then(Value::as_str)
                        .filter(|n| !n.is_empty())
                        .map(str::to_string);
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub(super) fn path_to_leaf(&self) -> Vec<Value> {
        let by_id: HashMap<&str, &Value> = self
            .entries
            .iter()
            .filter_map(|e| e.get("id").and_then(Value::as_str).map(|id| (id, e)))
            .collect();
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut cur = self.leaf.as_deref();
        while let Some(id) = cur {
            if !seen.insert(id) {
                break;
            }
            let Some(e) = by_id.get(id) else { break };
            out.push((*e).clone());
            cur = e.get("parentId").and_then(Value::as_str);
        }
        out.reverse();
        out
    }

    pub(super) fn path_has(&self, ty: &str) -> bool {
        self.path_to_leaf()
            .iter()
            .any(|e| e.get("type").and_then(Value::as_str) == Some(ty))
    }

    fn new_entry_id(&mut self) -> String {
        let id = session::new_entry_id(|id| self.ids.contains(id));
        self.ids.insert(id.clone());
        id
    }

    /// Appends an entry (`fields` without id/parentId/timestamp) as a child of the leaf.
    pub(super) fn append(&mut self, ty: &str, fields: Map<String, Value>) -> Value {
        let id = self.new_entry_id();
        let mut entry = Map::new();
        entry.insert("type".into(), Value::String(ty.into()));
        entry.insert("id".into(), Value::String(id.clone()));
        entry.insert(
            "parentId".into(),
            self.leaf.clone().map_or(Value::Null, Value::String),
        );
        entry.insert("timestamp".into(), Value::String(crate::time::now_iso()));
        entry.extend(fields);
        let entry = Value::Object(entry);
        self.leaf = Some(id);
        self.entries.push(entry.clone());
        self.persist(&entry);
        entry
    }

    pub(super) fn append_message(&mut self, message: &Value) -> Value {
        self.messages.push(message.clone());
        let mut f = Map::new();
        f.insert("message".into(), message.clone());
        self.append("message", f)
    }

    fn persist(&mut self, entry: &Value) {
        let Some(path) = self.file.clone() else {
            return;
        };
        if self.write_failed {
            return;
        }
        let line = entry.to_string();
        if self.writer.is_none() {
            self.pending.push(line);
            let role = entry
                .get("message")
                .and_then(|m| m.get("role"))
                .and_then(Value::as_str);
            if matches!(role, Some("user" | "assistant")) {
                self.create_file(&path);
            }
            return;
        }
        self.write_line(&line);
    }

    fn create_file(&mut self, path: &Path) {
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let mut opts = OpenOptions::new();
        if self.reuse_empty {
            opts.write(true).truncate(true);
        } else {
            opts.write(true).create_new(true);
        }
        match opts.open(path) {
            Ok(f) => {
                self.writer = Some(f);
                let lines = std::mem::take(&mut self.pending);
                for l in lines {
                    self.write_line(&l);
                }
            }
            Err(e) => {
                self.write_failed = true;
                write_stderr(&format!(
                    "scripted-agent: cannot create session file {}: {e}",
                    path.display()
                ));
            }
        }
    }

    fn write_line(&mut self, line: &str) {
        if let Some(f) = &mut self.writer {
            let mut buf = Vec::with_capacity(line.len() + 1);
            buf.extend_from_slice(line.as_bytes());
            buf.push(b'\n');
            if let Err(e) = f.write_all(&buf) {
                self.write_failed = true;
                write_stderr(&format!(
                    "scripted-agent: cannot write the session file: {e}"
                ));
            }
        }
    }
}

pub(super) fn session_has_assistant(s: &Session) -> bool {
    s.messages
        .iter()
        .any(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
}
