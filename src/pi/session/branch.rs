//! Host-built branches of a session (pi-rpc.md §12, contract A `fork`, contract-semantics §1.10).
//!
//! The file mirrors Pi's `SessionManager.createBranchedSession`:
//!
//! - header `{"type":"session","version":3,"id":new_id,"timestamp":now,"cwd":<source cwd>,
//!   "parentSession":<source path, absolute>}` (`cwd` left out only if the source has none);
//! - the source entries on the path root → target leaf, in that order, unchanged (same ids,
//!   same `parentId`s) — except `label` entries on that path, which are dropped (labels are
//!   tree nodes, so an entry whose parent was a dropped label is re-parented to the previous
//!   kept entry, and a compaction's `firstKeptEntryId` naming a dropped label moves to the next
//!   kept entry);
//! - then one new `label` entry per label that is in effect for an entry on the kept path (the
//!   latest non-empty `label` entry for that target anywhere in the source file, in Pi's
//!   resolution order; an empty label clears it), with a fresh 8-hex id, the original label
//!   timestamp, chained after the last path entry. Pi does exactly this, so after a branch with
//!   labels the file's last entry (Pi's resume leaf) is the last label entry; see
//!   [`BranchInfo::file_leaf_id`].
//!
//! Target leaf: the selected entry for [`ForkPosition::At`], its `parentId` for
//! [`ForkPosition::Before`] (which needs a `message` entry with role `user`). A null target leaf
//! gives a header-only session that still links to its source through `parentSession`.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::{json, Value};

use super::write::{header_value, write_new_file};
use super::{new_entry_id, SessionFile};
use crate::error::{Error, Result};

/// Where a fork cuts the source branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ForkPosition {
    /// Keep root → the selected entry inclusive (contract A's default).
    #[default]
    At,
    /// Keep root → the parent of the selected user message (the message itself is dropped).
    Before,
}

impl ForkPosition {
    /// `"at"` or `"before"`, as the contracts spell them.
    pub fn as_str(self) -> &'static str {
        match self {
            ForkPosition::At => "at",
            ForkPosition::Before => "before",
        }
    }

    /// Parses `"at"` / `"before"`.
    pub fn parse(text: &str) -> Result<ForkPosition> {
        match text {
            "at" => Ok(ForkPosition::At),
            "before" => Ok(ForkPosition::Before),
            other => Err(Error::invalid(format!(
                "Invalid fork position {other:?}. Repair: use \"at\" (branch at the entry) or \"before\" (branch before a user message)."
            ))),
        }
    }
}

/// What [`write_branch`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchInfo {
    /// The selected source entry: `entry_id`, or the source leaf when none was given (`None`
    /// only when the source has no entries).
    pub source_entry_id: Option<String>,
    /// The last entry of the kept path (the target leaf; when the target itself is a `label`
    /// entry, the nearest non-label ancestor). `None`: the branch is header-only.
    pub leaf_id: Option<String>,
    /// The last entry written to the file, where Pi resumes: [`leaf_id`](Self::leaf_id), or the
    /// last re-written `label` entry when labels were carried over.
    pub file_leaf_id: Option<String>,
    /// Path entries written (label entries not counted).
    pub entries_written: usize,
    /// Label entries written after the path.
    pub labels_written: usize,
}

/// Writes a new session file at `new_path` (id `new_id`) holding `source`'s branch up to the
/// target leaf (module docs). `entry_id` `None` selects the source leaf.
///
/// Errors, checked before anything is written: an unknown entry
/// (`Cannot fork: entry not found: X. Repair: …`, `invalid_params`); `Before` on an entry that
/// is not a user `message` (`Cannot fork before entry X: the selected entry is not a user
/// message. Repair: use position "at" …`, `invalid_params`); an existing file at `new_path`
/// (`conflict`). The file is written atomically (see [`super::write`]).
pub fn write_branch(
    source: &SessionFile,
    entry_id: Option<&str>,
    position: ForkPosition,
    new_path: &Path,
    new_id: &str,
) -> Result<BranchInfo> {
    let selected = match entry_id {
        Some(id) => Some(source.entry(id).ok_or_else(|| {
            Error::invalid(format!(
                "Cannot fork: entry not found: {id}. Repair: pass the id of an entry in the source session (get_entries or get_tree lists them), or omit entryId to fork at the source leaf."
            ))
        })?),
        None => source.entries.last(),
    };
    let source_entry_id = selected.and_then(|e| e["id"].as_str()).map(str::to_string);

    let target: Option<String> = match (selected, position) {
        (None, _) => None,
        (Some(entry), ForkPosition::At) => entry["id"].as_str().map(str::to_string),
        (Some(entry), ForkPosition::Before) => {
            if entry["type"] != "message" || entry["message"]["role"] != "user" {
                let id = source_entry_id.as_deref().unwrap_or_default();
                return Err(Error::invalid(format!(
                    "Cannot fork before entry {id}: the selected entry is not a user message. Repair: use position \"at\" to branch at this entry (it becomes the last entry of the fork), or pass the id of a user message to branch just before it."
                )));
            }
            entry["parentId"].as_str().map(str::to_string)
        }
    };

    let path = match &target {
        Some(leaf) => source.path_to(leaf),
        None => Vec::new(),
    };
    let kept = strip_labels(&path);
    let kept_ids: HashSet<String> = kept
        .iter()
        .filter_map(|e| e["id"].as_str().map(str::to_string))
        .collect();

    let mut taken = kept_ids.clone();
    let mut parent = kept
        .last()
        .and_then(|e| e["id"].as_str())
        .map(str::to_string);
    let mut labels = Vec::new();
    for (target_id, label, timestamp) in resolved_labels(source) {
        if !kept_ids.contains(&target_id) {
            continue;
        }
        let id = new_entry_id(|c| taken.contains(c));
        taken.insert(id.clone());
        let mut entry = json!({"type": "label", "id": id, "parentId": parent});
        if let Some(ts) = timestamp {
            entry["timestamp"] = ts;
        }
        entry["targetId"] = Value::from(target_id);
        entry["label"] = Value::from(label);
        parent = Some(id);
        labels.push(entry);
    }

    let header = header_value(new_id, source.cwd().map(str::to_string), Some(&source.path))?;
    let leaf_id = kept
        .last()
        .and_then(|e| e["id"].as_str())
        .map(str::to_string);
    let info = BranchInfo {
        source_entry_id,
        leaf_id,
        file_leaf_id: parent,
        entries_written: kept.len(),
        labels_written: labels.len(),
    };
    let mut lines = Vec::with_capacity(1 + kept.len() + labels.len());
    lines.push(header);
    lines.extend(kept);
    lines.extend(labels);
    write_new_file(new_path, &lines)?;
    Ok(info)
}

/// The path without its `label` entries, re-chained (Pi's `pathWithoutLabels`).
fn strip_labels(path: &[&Value]) -> Vec<Value> {
    let mut kept = Vec::with_capacity(path.len());
    let mut replacement: HashMap<String, String> = HashMap::new();
    let mut pending: Vec<String> = Vec::new();
    let mut parent: Option<String> = None;
    for entry in path {
        let id = entry["id"].as_str().unwrap_or_default().to_string();
        if entry["type"] == "label" {
            pending.push(id);
            continue;
        }
        for label_id in pending.drain(..) {
            replacement.insert(label_id, id.clone());
        }
        let mut entry = (*entry).clone();
        let want = parent.clone().map(Value::from).unwrap_or(Value::Null);
        if entry["parentId"] != want {
            entry["parentId"] = want;
        }
        if entry["type"] == "compaction" {
            if let Some(first) = entry["firstKeptEntryId"].as_str() {
                if first != id {
                    if let Some(to) = replacement.get(first) {
                        entry["firstKeptEntryId"] = Value::from(to.clone());
                    }
                }
            }
        }
        parent = Some(id);
        kept.push(entry);
    }
    kept
}

/// Labels in effect, as Pi's `labelsById` map builds them over the whole file in order: a
/// non-empty label sets (keeping the target's first position), an empty or missing one deletes.
/// Items: (targetId, label, label entry timestamp).
fn resolved_labels(source: &SessionFile) -> Vec<(String, String, Option<Value>)> {
    let mut labels: Vec<(String, String, Option<Value>)> = Vec::new();
    for entry in source.entries.iter().filter(|e| e["type"] == "label") {
        let Some(target) = entry["targetId"].as_str() else {
            continue;
        };
        let timestamp = entry.get("timestamp").cloned();
        let position = labels.iter().position(|(t, _, _)| t == target);
        match (entry["label"].as_str().filter(|l| !l.is_empty()), position) {
            (Some(label), Some(i)) => {
                labels[i] = (target.to_string(), label.to_string(), timestamp)
            }
            (Some(label), None) => labels.push((target.to_string(), label.to_string(), timestamp)),
            (None, Some(i)) => {
                labels.remove(i);
            }
            (None, None) => {}
        }
    }
    labels
}
