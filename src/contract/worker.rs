//! Contract C (`threads_*` worker tools): strict request validation, the derived identities
//! (worker id, send message id, request fingerprint), granted-path resolution, the worker
//! prompt and report texts, and the `WorkerView` projection. Nothing here touches the store or
//! the runtime; the filesystem is read only to check `directory` and resolve `paths`.
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

// ---- projection ---------------------------------------------------------------------------

/// Everything a `WorkerView` and a list status are made of, as read from the store.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerFacts {
    pub worker_id: WorkerId,
    pub coordinator_id: SessionId,
    pub key: String,
    pub title: Option<String>,
    pub directory: String,
    pub agent: Option<String>,
    /// `{providerID, id, variant?}` when known.
    pub model: Option<Model>,
    pub outcome: Option<Outcome>,
    pub report: Option<Report>,
    /// The hidden override.
    pub hidden_override: Option<bool>,
    /// The process row's status and phase.
    pub status: ThreadStatus,
    pub phase: Phase,
    /// Issue 30, `THREADBASE_QUEUE=1`: waiting for a slot, at this position.
    pub queue_position: Option<i64>,
}

impl WorkerFacts {
    /// `hidden`: the override when set, else true exactly for a PASS / PASS WITH NOTES report.
    pub fn hidden(&self) -> bool {
        self.hidden_override
            .unwrap_or_else(|| self.report.as_ref().is_some_and(Report::hides))
    }

    /// The contract's `WorkerView`, exactly its ten fields.
    pub fn view(&self) -> WorkerView<'_> {
        WorkerView {
            worker_id: self.worker_id.as_str(),
            coordinator_id: self.coordinator_id.as_str(),
            key: &self.key,
            title: self.title.as_deref().unwrap_or(&self.key),
            directory: &self.directory,
            agent: self.agent.as_deref(),
            model: self.model.as_ref(),
            outcome: self.outcome,
            report: self.report.as_ref(),
            hidden: self.hidden(),
            status: self.queue_position.map(QueuedStatus),
        }
    }

    /// The list status (see [`list_status`]).
    pub fn list_status(&self) -> &str {
        list_status(
            self.status,
            self.phase,
            self.report.as_ref().map(|r| r.verdict.as_str()),
            self.outcome,
        )
    }
}

/// A worker's status as the original's terminal UI lists it, first match: `needs input`
/// (never: the runtime answers dialogs itself) > `running` (a live process in a run) > the
/// report verdict > `starting` (outcome null) > `no report` (succeeded) > `failed` /
/// `interrupted`. Not part of any tool result: `threadbase top` shows it.
pub fn list_status(
    status: ThreadStatus,
    phase: Phase,
    verdict: Option<&str>,
    outcome: Option<Outcome>,
) -> &str {
    if status == ThreadStatus::Live && phase == Phase::Busy {
        return "running";
    }
    if let Some(v) = verdict {
        return v;
    }
    match outcome {
        None => "starting",
        Some(Outcome::Succeeded) => "no report",
        Some(o @ (Outcome::Failed | Outcome::Interrupted)) => o.as_str(),
    }
}

/// The contract's `WorkerView`, borrowed from [`WorkerFacts`].
#[derive(Debug, Clone, Copy, Serialize)]
pub struct WorkerView<'a> {
    #[serde(rename = "workerID")]
    pub worker_id: &'a str,
    #[serde(rename = "coordinatorID")]
    pub coordinator_id: &'a str,
    pub key: &'a str,
    pub title: &'a str,
    pub directory: &'a str,
    pub agent: Option<&'a str>,
    pub model: Option<&'a Model>,
    pub outcome: Option<Outcome>,
    pub report: Option<&'a Report>,
    pub hidden: bool,
    /// Not one of the contract's ten fields: present only while the worker waits in the queue
    /// (`THREADBASE_QUEUE=1`, issue 30), `queued (position N)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<QueuedStatus>,
}

/// A queued worker's `status`: `queued (position N)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuedStatus(pub i64);

impl Serialize for QueuedStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("queued (position {})", self.0))
    }
}

/// A worker's model, `{providerID, id, variant?}`, as stored on its row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Model {
    #[serde(rename = "providerID")]
    pub provider_id: String,
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// `{workers}`: `threads_list`, `threads.snapshot` and `threads.restore`, exactly as the
/// original returns them (the list statuses of its terminal UI are threadbase's own views':
/// `threadbase top`, [`list_status`]).
#[derive(Debug, Serialize)]
pub struct Workers<'a> {
    pub workers: Vec<WorkerView<'a>>,
}

impl<'a> Workers<'a> {
    /// The views of `facts`, in their order.
    pub fn of(facts: impl IntoIterator<Item = &'a WorkerFacts>) -> Workers<'a> {
        Workers {
            workers: facts.into_iter().map(WorkerFacts::view).collect(),
        }
    }
}

/// `threads_send`'s result.
#[derive(Debug, Serialize)]
pub struct Sent<'a> {
    #[serde(rename = "workerID")]
    pub worker_id: &'a str,
    #[serde(rename = "messageID")]
    pub message_id: &'a str,
}

/// `threads_report`'s result.
#[derive(Debug, Serialize)]
pub struct Reported<'a> {
    #[serde(rename = "workerID")]
    pub worker_id: &'a str,
    pub report: &'a Report,
}

/// The model a worker runs with, from its Pi args (`--provider P --model ID` or
/// `--model P/ID[:LEVEL]`; the last occurrence wins). `None` unless provider and id are known.
pub fn model_from_args(args: &[String]) -> Option<Value> {
    let mut provider: Option<String> = None;
    let mut model: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--provider" => {
                provider = args.get(i + 1).cloned();
                i += 1;
            }
            "--model" => {
                model = args.get(i + 1).cloned();
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    let model = model?;
    let (prefix, rest) = match model.split_once('/') {
        Some((p, r)) if !p.is_empty() => (Some(p.to_string()), r.to_string()),
        _ => (None, model.clone()),
    };
    let (id, variant) = match rest.rsplit_once(':') {
        Some((id, level)) if !id.is_empty() && !level.is_empty() => {
            (id.to_string(), Some(level.to_string()))
        }
        _ => (rest, None),
    };
    let provider = provider.or(prefix)?;
    if id.is_empty() {
        return None;
    }
    let mut v = json!({"providerID": provider, "id": id});
    if let Some(level) = variant {
        v["variant"] = json!(level);
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(name: &str, params: &Value) -> Result<WorkerRequest> {
        super::parse(method(name).unwrap(), params)
    }

    #[test]
    fn golden_identities() {
        assert_eq!(
            fingerprint("Workstream", "/work", "Verify", None, None),
            "386dfd06102da10f8ca294a78d241e8a33d6921ff86f0615d282a618b140bdcf"
        );
        assert_eq!(
            digest(&json!(["Workstream", "/work", "Verify"])),
            "386dfd06102da10f8ca294a78d241e8a33d6921ff86f0615d282a618b140bdcf"
        );
        let w = worker_identity(&SessionId::new("ses_coord"), "review");
        assert_eq!(w.as_str(), "ses_b47bb7c83655aa899fd1b7f2b4899c1f");
        assert_eq!(
            send_message_id(&w, "k1"),
            "msg_f3793a38a282b806d2a764e3603af485"
        );
        // Empty grants leave the fingerprint as it was; agent and grants change it.
        assert_eq!(
            fingerprint("Workstream", "/work", "Verify", None, Some(&[])),
            fingerprint("Workstream", "/work", "Verify", None, None)
        );
        let with_agent = fingerprint("Workstream", "/work", "Verify", Some("r"), None);
        assert_eq!(
            with_agent,
            digest(&json!(["Workstream", "/work", "Verify", "r"]))
        );
        let with_paths = fingerprint(
            "Workstream",
            "/work",
            "Verify",
            None,
            Some(&["/a".to_string()]),
        );
        assert_eq!(
            with_paths,
            digest(&json!(["Workstream", "/work", "Verify", {"paths": ["/a"]}]))
        );
        // The pair is JSON-encoded, so separators inside ids cannot collide.
        assert_ne!(
            worker_identity(&SessionId::new("ses_a:b"), "c"),
            worker_identity(&SessionId::new("ses_a"), "b:c")
        );
        // Non-ASCII and '/' are hashed unescaped, like JSON.stringify.
        assert_eq!(
            serde_json::to_string(&json!(["é/ü", "\u{2028}"])).unwrap(),
            "[\"é/ü\",\"\u{2028}\"]"
        );
        let m = new_message_id();
        assert!(m.starts_with("msg_") && m.len() == 36);
    }

    #[test]
    fn strict_shapes() {
        let e = parse(
            "threads_spawn",
            &json!({"key": "k", "title": "t", "directory": "/", "task": "x", "extra": 1}),
        )
        .unwrap_err();
        assert!(e.message.starts_with("Invalid threads_spawn parameters: unexpected field extra (allowed: key, title, directory, task, agent, paths). Repair:"), "{}", e.message);
        let e = parse("threads_spawn", &json!({"key": ""})).unwrap_err();
        assert!(
            e.message
                .contains("missing required fields title, directory, task"),
            "{}",
            e.message
        );
        let e = parse(
            "threads_spawn",
            &json!({"key": "", "title": "t", "directory": "/d", "task": "x", "agent": ""}),
        )
        .unwrap_err();
        assert!(e.message.contains("key must be a non-empty string"));
        assert!(e.message.contains("agent must be a non-empty string"));
        let long: String = "é".repeat(201);
        let e = parse(
            "threads_send",
            &json!({"workerID": "ses_x", "key": long, "text": "t"}),
        )
        .unwrap_err();
        assert!(e
            .message
            .contains("key must be at most 200 characters, got 201"));
        // Astral characters count two units each, like JavaScript.
        let e = parse(
            "threads_send",
            &json!({"workerID": "ses_x", "key": "😀".repeat(101), "text": "t"}),
        )
        .unwrap_err();
        assert!(e.message.contains("got 202"));
        let ok = parse(
            "threads_send",
            &json!({"workerID": "ses_x", "key": "any key: / \\ \n 😀", "text": "t"}),
        )
        .unwrap();
        assert!(matches!(ok, WorkerRequest::Send { .. }));
        assert_eq!(
            parse("threads_list", &json!({})).unwrap(),
            WorkerRequest::List
        );
        assert_eq!(
            parse("threads_list", &Value::Null).unwrap(),
            WorkerRequest::List
        );
        assert!(parse("threads_list", &json!({"x": 1})).is_err());
        // paths: [] is absent; more than 16 are refused; items are non-empty strings.
        let r = parse(
            "threads_spawn",
            &json!({"key": "k", "title": "t", "directory": "/d", "task": "x", "paths": []}),
        )
        .unwrap();
        assert!(matches!(
            r,
            WorkerRequest::Spawn(SpawnRequest { paths: None, .. })
        ));
        let many: Vec<String> = (0..17).map(|i| format!("/p{i}")).collect();
        let e = parse(
            "threads_spawn",
            &json!({"key": "k", "title": "t", "directory": "/d", "task": "x", "paths": many}),
        )
        .unwrap_err();
        assert!(e
            .message
            .contains("paths must list at most 16 directories, got 17"));
        let e = parse(
            "threads_spawn",
            &json!({"key": "k", "title": "t", "directory": "/d", "task": "x", "paths": "/a"}),
        )
        .unwrap_err();
        assert!(e.message.contains("paths must be an array of strings"));
    }

    #[test]
    fn reports_and_rpc_inputs() {
        let r = parse(
            "threads_report",
            &json!({"verdict": "PASS WITH NOTES", "summary": "ok", "evidence": []}),
        )
        .unwrap();
        assert_eq!(
            r,
            WorkerRequest::Report(Report {
                verdict: "PASS WITH NOTES".into(),
                summary: "ok".into(),
                evidence: vec![]
            })
        );
        let e = parse(
            "threads_report",
            &json!({"verdict": "OK", "summary": " ", "evidence": [1]}),
        )
        .unwrap_err();
        assert!(e.message.contains(
            "verdict must be one of PASS, PASS WITH NOTES, FAIL, INCONCLUSIVE; got \"OK\""
        ));
        assert!(e.message.contains("summary must be non-empty text"));
        assert!(e.message.contains("evidence must be an array of strings"));
        let e = parse(
            "threads_report",
            &json!({"verdict": "PASS", "summary": "s"}),
        )
        .unwrap_err();
        assert!(e.message.contains("missing required field evidence"));
        let ids: Vec<String> = (0..101).map(|i| format!("ses_{i}")).collect();
        let e = parse("threads.snapshot", &json!({"coordinatorIDs": ids})).unwrap_err();
        assert!(e.message.contains("at most 100 ids"));
        assert_eq!(
            parse("threads.restore", &json!({"coordinatorIDs": []})).unwrap(),
            WorkerRequest::Restore(Coordinators {
                coordinator_ids: vec![]
            })
        );
        assert!(parse("threads.snapshot", &json!({"input": {}})).is_err());
    }

    #[test]
    fn texts() {
        let r = Report {
            verdict: "FAIL".into(),
            summary: "broken \"x\"".into(),
            evidence: vec!["cargo test: 1 failed".into()],
        };
        assert_eq!(
            report_notice_text("ses_w", "my key", &r),
            "Managed worker ses_w (my key) report:\n{\"verdict\":\"FAIL\",\"summary\":\"broken \\\"x\\\"\",\"evidence\":[\"cargo test: 1 failed\"]}"
        );
        // opzero1/threads `spawn`: the task, a blank line, the worker-instructions paragraph (with
        // `grantNotice(paths)` after its second sentence), and nothing after it.
        const REST: &str = " You may use native subagent for bounded tasks or reviews when useful, within the brief's delegation limits and your permissions. Delegation is optional. Pass relevant context, scope, and constraints to each subagent. Do not call threads_spawn. Review your subagents' results and resolve any outstanding work before reporting. Only you call threads_report with the combined verdict, summary, and evidence; subagents return results to you. Runtime completion alone does not establish task success.";
        assert_eq!(
            worker_prompt("Do it", "/w", Some(&["/a".into(), "/b".into()])),
            format!("Do it\n\nYou are a managed worker assigned to /w. Work only within the assigned scope. You may also use these granted directories when the task requires them: /a, /b.{REST}")
        );
        let expected = format!(
            "Do it\n\nYou are a managed worker assigned to /w. Work only within the assigned scope.{REST}"
        );
        assert_eq!(worker_prompt("Do it", "/w", None), expected);
        assert_eq!(worker_prompt("Do it", "/w", Some(&[])), expected);
    }

    #[test]
    fn models_from_args() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            model_from_args(&v(&["--model", "anthropic/claude:high"])),
            Some(json!({"providerID": "anthropic", "id": "claude", "variant": "high"}))
        );
        assert_eq!(
            model_from_args(&v(&["--provider", "openai", "--model", "gpt"])),
            Some(json!({"providerID": "openai", "id": "gpt"}))
        );
        assert_eq!(model_from_args(&v(&["--model", "gpt"])), None);
        assert_eq!(model_from_args(&v(&["--thinking", "high"])), None);
    }

    #[test]
    fn views_and_statuses() {
        let mut f = WorkerFacts {
            worker_id: "ses_w".into(),
            coordinator_id: "ses_c".into(),
            key: "k".into(),
            title: None,
            directory: "/d".into(),
            agent: None,
            model: None,
            outcome: None,
            report: None,
            hidden_override: None,
            status: ThreadStatus::Live,
            phase: Phase::Starting,
            queue_position: None,
        };
        let v = serde_json::to_value(f.view()).unwrap();
        assert_eq!(
            v.as_object().unwrap().keys().collect::<Vec<_>>(),
            [
                "workerID",
                "coordinatorID",
                "key",
                "title",
                "directory",
                "agent",
                "model",
                "outcome",
                "report",
                "hidden"
            ]
        );
        assert_eq!(v["title"], "k");
        assert_eq!(f.list_status(), "starting");
        f.phase = Phase::Busy;
        assert_eq!(f.list_status(), "running");
        f.phase = Phase::Idle;
        f.outcome = Some(Outcome::Succeeded);
        assert_eq!(f.list_status(), "no report");
        f.outcome = Some(Outcome::Interrupted);
        assert_eq!(f.list_status(), "interrupted");
        f.report = Some(Report {
            verdict: "PASS".into(),
            summary: "s".into(),
            evidence: vec![],
        });
        assert_eq!(f.list_status(), "PASS");
        assert!(f.hidden());
        f.hidden_override = Some(false);
        assert!(!f.hidden());
    }
}
