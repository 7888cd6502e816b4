//! Contract B child transcripts (contract-semantics §2.5, §2.10): a new session file seeded with
//! a frozen snapshot of the lexical parent's conversation.
//!
//! The snapshot is what the parent's model sees, i.e. Pi's compaction-aware context of the
//! parent's current branch (root → last entry in file order): with a `compaction` on the branch,
//! only the latest one counts, followed by the entries from its `firstKeptEntryId` up to it and
//! everything after it (older entries are already summarized); `context_edit` entries on the
//! branch are applied (a `null` replacement omits the target, otherwise its content is replaced).
//! From that context:
//!
//! - kept unchanged: `message` entries with role `user`, `assistant`, `toolResult`, `custom`,
//!   `bashExecution` (shell output), and `custom_message` entries;
//! - turned into a user `message` entry whose content is the summary text (as pi-subagent does):
//!   the compaction and every `branch_summary` with a summary; the new entry keeps the source
//!   entry's id and timestamp;
//! - dropped: `system` messages, assistant messages that ended `stopReason` `error` or
//!   `aborted`, tool results whose call is not on the kept branch, and every non-context entry
//!   (`model_change`, `thinking_level_change`, `custom`, `label`, `session_info`, `usage`, …);
//! - an assistant `toolCall` block whose result is not on the kept branch is removed; an
//!   assistant message then left without tool calls has `stopReason` `toolUse` rewritten to
//!   `stop`.
//!
//! Kept entries keep their ids and timestamps; only `parentId`s change, so that they form one
//! chain.
//!
//! File layout: header (`parentSession` = the lexical parent's file), then
//! `session_info {name}`, then the ownership `custom` entry
//! `{customType:"pi-subagent:thread:v1", data: ownership}`, then the inherited entries. The name
//! and ownership come **first**, as pi-subagent writes them ("before transcript messages so an
//! older restored leaf still has name and ownership as ancestors"); the leaf is the last inherited
//! entry (or the ownership entry when nothing is inherited).

use std::collections::HashSet;
use std::path::Path;

use serde_json::{json, Value};

use super::write::{header_value, write_new_file};
use super::{new_entry_id, path_text, resolve_path, SessionFile};
use crate::error::Result;

/// `customType` of the ownership entry of a contract B child transcript.
pub const OWNERSHIP_CUSTOM_TYPE: &str = "pi-subagent:thread:v1";

/// Writes a contract B child transcript at `new_path` seeded from `parent`'s current branch
/// (module docs): header `{…,"id":new_id,"cwd":cwd,"parentSession":parent_session_path}`,
/// `session_info {name: session_name}` (e.g. `worker /root/task`), the ownership entry
/// (`data` = `ownership`, with `inheritedCount` added when it is an object without one), then the
/// inherited entries. Atomic and exclusive like every write here.
pub fn write_inherited_context(
    parent: &SessionFile,
    new_path: &Path,
    new_id: &str,
    cwd: &Path,
    parent_session_path: &Path,
    session_name: &str,
    ownership: Value,
) -> Result<()> {
    write_subagent_session(
        Some(parent),
        new_path,
        new_id,
        cwd,
        Some(parent_session_path),
        session_name,
        ownership,
    )
    .map(|_| ())
}

/// [`write_inherited_context`] for any contract B child: `inherit_from` `None` inherits nothing
/// (independent roots), `parent_session` `None` leaves the header without a link. Returns the
/// number of inherited entries written.
pub fn write_subagent_session(
    inherit_from: Option<&SessionFile>,
    new_path: &Path,
    new_id: &str,
    cwd: &Path,
    parent_session: Option<&Path>,
    session_name: &str,
    mut ownership: Value,
) -> Result<usize> {
    let inherited = inherit_from.map(inherited_entries).unwrap_or_default();
    let header = header_value(
        new_id,
        Some(path_text(&resolve_path(cwd), "session cwd")?),
        parent_session,
    )?;
    if let Some(data) = ownership.as_object_mut() {
        data.entry("inheritedCount")
            .or_insert_with(|| Value::from(inherited.len()));
    }

    let mut taken: HashSet<String> = inherited
        .iter()
        .filter_map(|e| e["id"].as_str().map(str::to_string))
        .collect();
    let mut fresh = || {
        let id = new_entry_id(|c| taken.contains(c));
        taken.insert(id.clone());
        id
    };
    let now = crate::time::now_iso();
    let info_id = fresh();
    let owner_id = fresh();
    let session_info = json!({
        "type": "session_info",
        "id": info_id,
        "parentId": null,
        "timestamp": now,
        "name": sanitize_name(session_name),
    });
    let owner = json!({
        "type": "custom",
        "customType": OWNERSHIP_CUSTOM_TYPE,
        "data": ownership,
        "id": owner_id,
        "parentId": info_id,
        "timestamp": now,
    });

    let count = inherited.len();
    let mut lines = Vec::with_capacity(3 + count);
    lines.push(header);
    lines.push(session_info);
    lines.push(owner);
    let mut parent_id = owner_id;
    for mut entry in inherited {
        entry["parentId"] = Value::from(parent_id);
        parent_id = entry["id"].as_str().unwrap_or_default().to_string();
        lines.push(entry);
    }
    write_new_file(new_path, &lines)?;
    Ok(count)
}

/// Pi's `appendSessionInfo` sanitizing: line breaks become spaces, then trimmed.
fn sanitize_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_break = false;
    for c in name.chars() {
        if c == '\r' || c == '\n' {
            if !in_break {
                out.push(' ');
            }
            in_break = true;
        } else {
            out.push(c);
            in_break = false;
        }
    }
    out.trim().to_string()
}

/// The entries a child inherits from `parent`'s current branch, filtered and rewritten as the
/// module docs describe, in order, with their original `parentId`s (the writer re-chains them).
pub fn inherited_entries(parent: &SessionFile) -> Vec<Value> {
    let branch = parent.branch();
    let context = context_entries(&branch);

    // Latest context edit per target among the context entries.
    let mut edits: Vec<(&str, &Value)> = Vec::new();
    for entry in context.iter().filter(|e| e["type"] == "context_edit") {
        if let Some(target) = entry["targetId"].as_str() {
            edits.retain(|(t, _)| *t != target);
            edits.push((target, &entry["replacement"]));
        }
    }
    let edit_for = |id: &str| edits.iter().find(|(t, _)| *t == id).map(|(_, r)| *r);

    let mut kept: Vec<Value> = Vec::new();
    for (index, entry) in context.iter().enumerate() {
        let id = entry["id"].as_str().unwrap_or_default();
        let edit = edit_for(id);
        if edit.is_some_and(Value::is_null) {
            continue;
        }
        let projected = match entry["type"].as_str().unwrap_or_default() {
            "message" => {
                let role = entry["message"]["role"].as_str().unwrap_or_default();
                if !matches!(
                    role,
                    "user" | "assistant" | "toolResult" | "custom" | "bashExecution"
                ) {
                    continue;
                }
                let mut entry = (*entry).clone();
                if let Some(replacement) = edit {
                    let content = &replacement["content"];
                    if role != "bashExecution" && !content.is_null() {
                        entry["message"]["content"] = match content {
                            Value::String(text) if role == "assistant" || role == "toolResult" => {
                                json!([{"type": "text", "text": text}])
                            }
                            other => other.clone(),
                        };
                    }
                }
                entry
            }
            "custom_message" => {
                let mut entry = (*entry).clone();
                if let Some(content) = edit.map(|r| &r["content"]).filter(|c| !c.is_null()) {
                    entry["content"] = content.clone();
                }
                entry
            }
            // Only the newest compaction (first in the context) contributes its summary.
            "compaction" if index == 0 => summary_message(entry),
            "branch_summary" if entry["summary"].as_str().is_some_and(|s| !s.is_empty()) => {
                summary_message(entry)
            }
            _ => continue,
        };
        kept.push(projected);
    }

    // Assistant messages that ended in an error or were aborted.
    kept.retain(|e| {
        !(e["message"]["role"] == "assistant"
            && matches!(
                e["message"]["stopReason"].as_str(),
                Some("error" | "aborted")
            ))
    });

    // Tool calls and results must pair up.
    let call_ids: HashSet<String> = kept
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .flat_map(|e| tool_call_ids(&e["message"]))
        .collect();
    let result_ids: HashSet<String> = kept
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "toolResult")
        .filter_map(|e| e["message"]["toolCallId"].as_str().map(str::to_string))
        .collect();
    kept.retain(|e| {
        !(e["type"] == "message"
            && e["message"]["role"] == "toolResult"
            && !e["message"]["toolCallId"]
                .as_str()
                .is_some_and(|id| call_ids.contains(id)))
    });
    for entry in kept.iter_mut() {
        if entry["type"] != "message" || entry["message"]["role"] != "assistant" {
            continue;
        }
        let message = &mut entry["message"];
        if let Some(blocks) = message["content"].as_array_mut() {
            blocks.retain(|b| {
                b["type"] != "toolCall"
                    || b["id"].as_str().is_some_and(|id| result_ids.contains(id))
            });
        }
        if tool_call_ids(message).is_empty() && message["stopReason"] == "toolUse" {
            message["stopReason"] = Value::from("stop");
        }
    }
    kept
}

/// Pi's `buildContextEntries`: the branch, or — with a compaction on it — the latest compaction,
/// then the non-system entries from its `firstKeptEntryId` up to it, then everything after it.
fn context_entries<'a>(branch: &[&'a Value]) -> Vec<&'a Value> {
    let Some(c) = branch.iter().rposition(|e| e["type"] == "compaction") else {
        return branch.to_vec();
    };
    let compaction = branch[c];
    let first_kept = compaction["firstKeptEntryId"].as_str();
    let mut out = vec![compaction];
    let mut found = false;
    for entry in &branch[..c] {
        if first_kept.is_some() && entry["id"].as_str() == first_kept {
            found = true;
        }
        let system = entry["type"] == "message" && entry["message"]["role"] == "system";
        if found && !system {
            out.push(entry);
        }
    }
    out.extend_from_slice(&branch[c + 1..]);
    out
}

/// A user message entry carrying a compaction's or branch summary's summary text, with the
/// source entry's id, parentId and timestamp.
fn summary_message(entry: &Value) -> Value {
    let timestamp = entry["timestamp"].clone();
    let ms = timestamp
        .as_str()
        .and_then(crate::time::ms_from_iso)
        .unwrap_or_else(crate::time::now_ms);
    json!({
        "type": "message",
        "id": entry["id"],
        "parentId": entry["parentId"],
        "timestamp": timestamp,
        "message": {
            "role": "user",
            "content": entry["summary"].as_str().unwrap_or_default(),
            "timestamp": ms,
        },
    })
}

/// The ids of the `toolCall` blocks of an assistant message.
fn tool_call_ids(message: &Value) -> Vec<String> {
    message["content"]
        .as_array()
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b["type"] == "toolCall")
                .filter_map(|b| b["id"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}
