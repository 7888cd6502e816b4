//! Contract C (`threads_*` worker tools): strict request validation, the derived identities
//! (worker id, send message id, request fingerprint), granted-path resolution, the worker
//! prompt and report texts; the results (`WorkerView` and the rest) are in `worker/view.rs`.
//! Nothing here touches the store or the runtime; the filesystem is read only to check `directory` and resolve `paths`.
//!
//! Texts follow the public implementation (`opzero1/threads`, see
//! `reference/contract-semantics.md` §3); every rejection ends with a `Repair:` hint.

use crate::domain::{Outcome, Phase, ThreadStatus};
use crate::domain::{SessionId, WorkerId};
use std::path::Path;

use serde::Serialize;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::contract::fields::{non_empty_text, type_name, FieldSet};
use crate::error::{Error, Result};
use crate::paths::json_quote;

/// The report verdicts, in the contract's order.
pub const VERDICTS: [&str; 4] = ["PASS", "PASS WITH NOTES", "FAIL", "INCONCLUSIVE"];
/// `key` is 1..200 UTF-16 code units (JavaScript string length), any characters.
pub const MAX_KEY_UNITS: usize = 200;
/// Granted paths accepted in one spawn.
pub const MAX_GRANTED_PATHS: usize = 16;
/// Coordinator ids accepted by `threads.snapshot` / `threads.restore`.
pub const MAX_COORDINATOR_IDS: usize = 100;
/// The slot limit when `THREADBASE_MAX_WORKERS` is unset or invalid.
pub const DEFAULT_MAX_WORKERS: i64 = 4;
/// The bounds of `THREADBASE_MAX_WORKERS`.
pub const MAX_WORKERS_RANGE: (i64, i64) = (1, 32);

/// A validated `threads_spawn` request (paths not yet resolved).
#[derive(Debug, Clone, PartialEq)]
pub struct SpawnRequest {
    pub key: String,
    pub title: String,
    pub directory: String,
    pub task: String,
    pub agent: Option<String>,
    /// The raw granted paths; `None` when absent or `[]`.
    pub paths: Option<Vec<String>>,
}

/// A worker's report, `{verdict, summary, evidence}` in that order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub verdict: String,
    pub summary: String,
    pub evidence: Vec<String>,
}

impl Report {
    /// `{verdict, summary, evidence}` in that order (what `JSON.stringify` of the parsed input
    /// prints).
    pub fn to_json(&self) -> Value {
        json!({"verdict": self.verdict, "summary": self.summary, "evidence": self.evidence})
    }

    /// Whether this verdict hides a worker by default.
    pub fn hides(&self) -> bool {
        verdict_hides(&self.verdict)
    }
}

/// `PASS` and `PASS WITH NOTES` hide a worker unless the override says otherwise.
pub fn verdict_hides(verdict: &str) -> bool {
    verdict == "PASS" || verdict == "PASS WITH NOTES"
}

/// One validated contract C call, one variant per method.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerRequest {
    Spawn(SpawnRequest),
    List,
    Send(SendRequest),
    Interrupt(WorkerRef),
    Hide(WorkerRef),
    Report(Report),
    Snapshot(Coordinators),
    Restore(Coordinators),
}

/// `threads_send`.
#[derive(Debug, Clone, PartialEq)]
pub struct SendRequest {
    pub worker_id: WorkerId,
    pub key: String,
    pub text: String,
}

/// `threads_interrupt`, `threads_hide`: the worker they act on.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRef {
    pub worker_id: WorkerId,
}

/// `threads.snapshot`, `threads.restore`: the coordinators whose workers they cover.
#[derive(Debug, Clone, PartialEq)]
pub struct Coordinators {
    pub coordinator_ids: Vec<SessionId>,
}

const WORKER_ID_SHAPE: &str = r#"{"workerID": "ses_0123456789abcdef0123456789abcdef"}"#;
const COORDINATORS_SHAPE: &str = r#"{"coordinatorIDs": ["ses_..."]}"#;

/// One method of contract C: its name on `serve`, its fields, the shape a rejection shows, and
/// how its fields become its request. The one place a method's name is spelled.
pub struct Method {
    pub name: &'static str,
    pub required: &'static [&'static str],
    pub optional: &'static [&'static str],
    pub shape: &'static str,
    parse: fn(&mut Fields<'_>) -> WorkerRequest,
}

impl Method {
    /// A model tool (`threads_*`), not the extension's RPC (`threads.snapshot`, …).
    pub fn is_tool(&self) -> bool {
        self.name.starts_with("threads_")
    }
}

/// Contract C's methods on `serve`, in the order the server lists them.
pub const METHODS: [Method; 8] = [
    Method {
        name: "threads_spawn",
        required: &["key", "title", "directory", "task"],
        optional: &["agent", "paths"],
        shape: r#"{"key": "review-api", "title": "Review the API", "directory": "/abs/project", "task": "Review src/api for bugs and report.", "agent": "reviewer", "paths": ["/abs/shared-docs"]} (agent and paths optional)"#,
        parse: |f| {
            WorkerRequest::Spawn(SpawnRequest {
                key: f.key("key"),
                title: f.text("title").unwrap_or_default(),
                directory: f.text("directory").unwrap_or_default(),
                task: f.text("task").unwrap_or_default(),
                agent: f.text("agent"),
                paths: f.paths("paths"),
            })
        },
    },
    Method {
        name: "threads_list",
        required: &[],
        optional: &[],
        shape: "{}",
        parse: |_| WorkerRequest::List,
    },
    Method {
        name: "threads_send",
        required: &["workerID", "key", "text"],
        optional: &[],
        shape: r#"{"workerID": "ses_0123456789abcdef0123456789abcdef", "key": "follow-up-1", "text": "Also check the tests."}"#,
        parse: |f| {
            WorkerRequest::Send(SendRequest {
                worker_id: f.text("workerID").unwrap_or_default().into(),
                key: f.key("key"),
                text: f.text("text").unwrap_or_default(),
            })
        },
    },
    Method {
        name: "threads_interrupt",
        required: &["workerID"],
        optional: &[],
        shape: WORKER_ID_SHAPE,
        parse: |f| {
            WorkerRequest::Interrupt(WorkerRef {
                worker_id: f.text("workerID").unwrap_or_default().into(),
            })
        },
    },
    Method {
        name: "threads_hide",
        required: &["workerID"],
        optional: &[],
        shape: WORKER_ID_SHAPE,
        parse: |f| {
            WorkerRequest::Hide(WorkerRef {
                worker_id: f.text("workerID").unwrap_or_default().into(),
            })
        },
    },
    Method {
        name: "threads_report",
        required: &["verdict", "summary", "evidence"],
        optional: &[],
        shape: r#"{"verdict": "PASS", "summary": "All checks pass.", "evidence": ["cargo test: 42 passed"]}"#,
        parse: |f| {
            WorkerRequest::Report(Report {
                verdict: f.verdict("verdict"),
                summary: f.summary("summary"),
                evidence: f.strings("evidence", None).unwrap_or_default(),
            })
        },
    },
    Method {
        name: "threads.snapshot",
        required: &["coordinatorIDs"],
        optional: &[],
        shape: COORDINATORS_SHAPE,
        parse: |f| {
            WorkerRequest::Snapshot(Coordinators {
                coordinator_ids: f.coordinator_ids(),
            })
        },
    },
    Method {
        name: "threads.restore",
        required: &["coordinatorIDs"],
        optional: &[],
        shape: COORDINATORS_SHAPE,
        parse: |f| {
            WorkerRequest::Restore(Coordinators {
                coordinator_ids: f.coordinator_ids(),
            })
        },
    },
];

/// The contract C method named `name`.
pub fn method(name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|m| m.name == name)
}

fn invalid(method: &Method, problems: &[String]) -> Error {
    Error::invalid(format!(
        "Invalid {} parameters: {}. Repair: use the shape {}.",
        method.name,
        problems.join("; "),
        method.shape
    ))
}

/// Parses and validates one contract C call.
pub fn parse(method: &Method, params: &Value) -> Result<WorkerRequest> {
    let empty = Map::new();
    let obj = match params {
        Value::Object(o) => o,
        // `threads_list` takes `{}`; a missing params object means the same.
        Value::Null if method.name == "threads_list" => &empty,
        other => {
            return Err(Error::invalid(format!(
                "{} parameters must be a JSON object, got {}. Repair: use the shape {}.",
                method.name,
                type_name(other),
                method.shape
            )))
        }
    };
    let problems = FieldSet {
        required: method.required,
        optional: method.optional,
        ignored: &[],
        allowed_label: "allowed",
        null_is_missing: false,
    }
    .problems(obj);
    if !problems.is_empty() {
        return Err(invalid(method, &problems));
    }
    let mut f = Fields {
        obj,
        errors: Vec::new(),
    };
    let req = (method.parse)(&mut f);
    if !f.errors.is_empty() {
        return Err(invalid(method, &f.errors));
    }
    Ok(req)
}

pub struct Fields<'a> {
    obj: &'a Map<String, Value>,
    errors: Vec<String>,
}

impl Fields<'_> {
    /// A non-empty string (`null` is refused like any other non-string).
    fn text(&mut self, key: &str) -> Option<String> {
        non_empty_text(self.obj.get(key), key, &mut self.errors)
    }

    /// A spawn or send key: 1..200 UTF-16 units, any characters.
    fn key(&mut self, key: &str) -> String {
        let Some(k) = self.text(key) else {
            return String::new();
        };
        let units = crate::text::utf16_len(&k);
        if units > MAX_KEY_UNITS {
            self.errors.push(format!(
                "{key} must be at most {MAX_KEY_UNITS} characters, got {units}"
            ));
        }
        k
    }

    fn verdict(&mut self, key: &str) -> String {
        let Some(v) = self.text(key) else {
            return String::new();
        };
        if !VERDICTS.contains(&v.as_str()) {
            self.errors.push(format!(
                "{key} must be one of {}; got {}",
                VERDICTS.join(", "),
                json_quote(&v)
            ));
        }
        v
    }

    /// The report summary: non-empty text (whitespace alone is empty; the `reports` table
    /// refuses it too).
    fn summary(&mut self, key: &str) -> String {
        let Some(s) = self.text(key) else {
            return String::new();
        };
        if s.trim().is_empty() {
            self.errors
                .push(format!("{key} must be non-empty text, not only whitespace"));
        }
        s
    }

    /// An array of strings; with `non_empty_items`, each item must be a non-empty string.
    fn strings(&mut self, key: &str, non_empty_items: Option<()>) -> Option<Vec<String>> {
        match self.obj.get(key) {
            None => None,
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
                let items: Vec<String> = items
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect();
                if non_empty_items.is_some() && items.iter().any(String::is_empty) {
                    self.errors
                        .push(format!("{key} items must be non-empty strings"));
                }
                Some(items)
            }
            Some(_) => {
                self.errors
                    .push(format!("{key} must be an array of strings"));
                None
            }
        }
    }

    /// `paths`: `[]` counts as absent; at most 16 non-empty strings.
    fn paths(&mut self, key: &str) -> Option<Vec<String>> {
        let paths = self.strings(key, Some(()))?;
        if paths.len() > MAX_GRANTED_PATHS {
            self.errors.push(format!(
                "{key} must list at most {MAX_GRANTED_PATHS} directories, got {}",
                paths.len()
            ));
        }
        (!paths.is_empty()).then_some(paths)
    }

    fn coordinator_ids(&mut self) -> Vec<SessionId> {
        let ids = self.strings("coordinatorIDs", None).unwrap_or_default();
        if ids.len() > MAX_COORDINATOR_IDS {
            self.errors.push(format!(
                "coordinatorIDs must list at most {MAX_COORDINATOR_IDS} ids, got {}",
                ids.len()
            ));
        }
        ids.into_iter().map(SessionId::new).collect()
    }
}

// ---- derived identities -------------------------------------------------------------------

/// `hex(sha256(JSON.stringify(parts)))`; `serde_json::to_string` prints the same compact bytes
/// (no spaces, `/` and non-ASCII unescaped).
pub fn digest(parts: &Value) -> String {
    let bytes = serde_json::to_vec(parts).unwrap_or_default();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `ses_` + the first 32 hex digits of `digest([coordinatorID, key])`.
pub fn worker_identity(coordinator_id: &SessionId, key: &str) -> WorkerId {
    WorkerId::new(format!(
        "ses_{}",
        &digest(&json!([coordinator_id, key]))[..32]
    ))
}

/// `msg_` + the first 32 hex digits of `digest([workerID, "send", key])`.
pub fn send_message_id(worker_id: &WorkerId, key: &str) -> String {
    format!(
        "msg_{}",
        &digest(&json!([worker_id.as_str(), "send", key]))[..32]
    )
}

/// `digest([title, directory, task, …agent?, …{paths}?])`, all 64 hex digits; `paths` are the
/// resolved, sorted grants (absent or empty leaves the element out).
pub fn fingerprint(
    title: &str,
    directory: &str,
    task: &str,
    agent: Option<&str>,
    paths: Option<&[String]>,
) -> String {
    let mut parts = vec![json!(title), json!(directory), json!(task)];
    if let Some(a) = agent {
        parts.push(json!(a));
    }
    if let Some(p) = paths.filter(|p| !p.is_empty()) {
        parts.push(json!({"paths": p}));
    }
    digest(&Value::Array(parts))
}

/// A random native message id: `msg_` + 32 hex digits.
pub fn new_message_id() -> String {
    format!("msg_{}", crate::ids::random_hex(32))
}

// ---- filesystem checks --------------------------------------------------------------------

/// `directory` must be absolute and an existing directory (symlinks followed).
pub fn check_directory(directory: &str) -> Result<()> {
    let p = Path::new(directory);
    if p.is_absolute() && std::fs::metadata(p).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "directory must be an existing absolute directory (got {}). Repair: pass the absolute path of an existing folder for the worker to run in, e.g. \"/home/me/project\".",
        json_quote(directory)
    )))
}

/// Resolves granted paths like the public implementation: each must be absolute, resolve
/// (realpath) to an existing directory that is not a filesystem root and whose real path has
/// no `*`, `?` or `\`; the real paths are deduplicated and sorted. `None` for no grants.
pub fn resolve_granted_paths(paths: Option<&[String]>) -> Result<Option<Vec<String>>> {
    let Some(paths) = paths.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let repair = "Repair: grant existing absolute folders (not / and without *, ? or \\ in their real path), or leave paths out.";
    let mut resolved: Vec<String> = Vec::with_capacity(paths.len());
    for path in paths {
        if !Path::new(path).is_absolute() {
            return Err(Error::invalid(format!(
                "Granted path must be absolute: {path}. {repair}"
            )));
        }
        let real = dunce::canonicalize(path)
            .ok()
            .filter(|r| std::fs::metadata(r).is_ok_and(|m| m.is_dir()));
        let Some(real) = real else {
            return Err(Error::invalid(format!(
                "Granted path must be an existing directory: {path}. {repair}"
            )));
        };
        if real.parent().is_none() {
            return Err(Error::invalid(format!(
                "Granted path cannot be a filesystem root: {path}. {repair}"
            )));
        }
        let real = real.to_string_lossy().into_owned();
        if real.contains(['*', '?', '\\']) {
            return Err(Error::invalid(format!(
                "Granted path contains a character that permission patterns cannot match literally: {real}. {repair}"
            )));
        }
        if !resolved.contains(&real) {
            resolved.push(real);
        }
    }
    // JavaScript's default sort compares UTF-16 code units.
    resolved.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
    Ok(Some(resolved))
}

// ---- texts --------------------------------------------------------------------------------

/// The worker's initial prompt: the task, a blank line, then the worker instructions (with
/// the granted directories when there are any).
pub fn worker_prompt(task: &str, directory: &str, paths: Option<&[String]>) -> String {
    let grants = match paths.filter(|p| !p.is_empty()) {
        Some(p) => format!(
            " You may also use these granted directories when the task requires them: {}.",
            p.join(", ")
        ),
        None => String::new(),
    };
    format!(
        "{task}\n\nYou are a managed worker assigned to {directory}. Work only within the assigned scope.{grants} You may use native subagent for bounded tasks or reviews when useful, within the brief's delegation limits and your permissions. Delegation is optional. Pass relevant context, scope, and constraints to each subagent. Do not call threads_spawn. Review your subagents' results and resolve any outstanding work before reporting. Only you call threads_report with the combined verdict, summary, and evidence; subagents return results to you. Runtime completion alone does not establish task success."
    )
}

/// The coordinator's notice text for a report:
/// `Managed worker <workerID> (<key>) report:\n<compact JSON of {verdict, summary, evidence}>`.
pub fn report_notice_text(worker_id: &str, key: &str, report: &Report) -> String {
    format!(
        "Managed worker {worker_id} ({key}) report:\n{}",
        report.to_json()
    )
}

mod view;
pub use view::*;

#[cfg(test)]
mod tests;
