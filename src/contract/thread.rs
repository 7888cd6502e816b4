//! Contract A (`thread` tool): strict per-action request validation with the public
//! implementation's error texts. Every rejection names what was wrong and ends with the
//! action's valid shape as `Repair:`.

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::contract::fields::{non_empty_text, type_name, FieldSet};
use crate::contract::projection::{Detail, Projection, Snapshot, ThreadFacts};
use crate::error::{Error, Result};
use crate::paths::{is_task_name, json_quote};
use crate::pi::session::ForkPosition;
use crate::runtime::SendMode;
use crate::store::list::{StateFilter, VisibilityFilter};

/// The exit message of a thread restored as stale: its owner died (pi-threads' text).
pub const STALE_MESSAGE: &str =
    "Thread was restored from the parent Pi session registry without a live process connection.";

/// Upper bound of `wait.timeoutMs`.
pub const MAX_WAIT_MS: u64 = 600_000;
/// Default `wait.timeoutMs`.
pub const DEFAULT_WAIT_MS: u64 = 30_000;
/// Schema errors reported at most.
const MAX_SCHEMA_ERRORS: usize = 5;

/// `list.parent` or `list.ancestor`: the reference text, not resolved yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListTarget {
    Parent(String),
    Ancestor(String),
}

/// A validated `thread` request, one variant per action: every value the contract enumerates
/// is an enum here, so the engine never parses a string again.
#[derive(Debug, Clone, PartialEq)]
pub enum ThreadRequest {
    Start(Start),
    List(List),
    Poll(Poll),
    Send(Send),
    Stop(Stop),
    Wait(Wait),
    Resume(Resume),
    Fork(Fork),
    Archive(Archive),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Start {
    pub prompt: String,
    pub name: Option<String>,
    pub task_name: Option<String>,
    pub args: Vec<String>,
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct List {
    pub state: StateFilter,
    pub visibility: VisibilityFilter,
    pub target: Option<ListTarget>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Poll {
    pub id: String,
    pub detail: Detail,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Send {
    pub id: String,
    pub message: String,
    pub mode: Option<SendMode>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stop {
    pub id: String,
    pub force: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Wait {
    pub id: String,
    pub detail: Detail,
    pub timeout_ms: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Resume {
    pub id: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Fork {
    pub id: Option<String>,
    pub entry_id: Option<String>,
    pub position: ForkPosition,
    pub name: Option<String>,
    pub task_name: Option<String>,
    pub args: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Archive {
    pub id: String,
    pub archived: bool,
}

/// One action of the `thread` tool: its name, its fields, the shape a rejection shows, and
/// how its fields become its request. The one place an action's name is spelled.
pub struct Action {
    pub name: &'static str,
    pub required: &'static [&'static str],
    pub optional: &'static [&'static str],
    pub shape: &'static str,
    parse: fn(&mut Fields<'_>) -> Result<ThreadRequest>,
}

/// Contract A's actions, in the order its texts list them.
pub const ACTIONS: [Action; 9] = [
    Action {
        name: "start",
        required: &["prompt"],
        optional: &["name", "taskName", "args", "cwd"],
        shape: r#"{ "action": "start", "prompt": "Inspect the tests and report failures. Do not edit files.", "taskName": "inspect_tests" }"#,
        parse: |v| {
            Ok(ThreadRequest::Start(Start {
                prompt: v.text("prompt").unwrap_or_default(),
                name: v.text("name"),
                task_name: v.task_name("taskName"),
                args: v.args("args"),
                cwd: v.text("cwd"),
            }))
        },
    },
    Action {
        name: "list",
        required: &[],
        optional: &["state", "visibility", "parent", "ancestor"],
        shape: r#"{ "action": "list", "state": "live", "visibility": "active" }"#,
        parse: |v| {
            let state = v.choice("state", STATES).unwrap_or_default();
            let visibility = v.choice("visibility", VISIBILITIES).unwrap_or_default();
            let (parent, ancestor) = (v.text("parent"), v.text("ancestor"));
            if v.obj.get("parent").is_some_and(|p| !p.is_null())
                && v.obj.get("ancestor").is_some_and(|a| !a.is_null())
            {
                return Err(crate::store::list::exclusive_filters(Some(""), Some("")).unwrap_err());
            }
            Ok(ThreadRequest::List(List {
                state,
                visibility,
                target: match (parent, ancestor) {
                    (Some(p), _) => Some(ListTarget::Parent(p)),
                    (None, Some(a)) => Some(ListTarget::Ancestor(a)),
                    (None, None) => None,
                },
            }))
        },
    },
    Action {
        name: "poll",
        required: &["id"],
        optional: &["detail"],
        shape: r#"{ "action": "poll", "id": "/root/inspect_tests", "detail": "summary" }"#,
        parse: |v| {
            Ok(ThreadRequest::Poll(Poll {
                id: v.text("id").unwrap_or_default(),
                detail: v.detail(),
            }))
        },
    },
    Action {
        name: "send",
        required: &["id", "message"],
        optional: &["mode"],
        shape: r#"{ "action": "send", "id": "/root/inspect_tests", "message": "Continue", "mode": "follow_up" }"#,
        parse: |v| {
            Ok(ThreadRequest::Send(Send {
                id: v.text("id").unwrap_or_default(),
                message: v.text("message").unwrap_or_default(),
                mode: v.choice("mode", MODES),
            }))
        },
    },
    Action {
        name: "stop",
        required: &["id"],
        optional: &["force"],
        shape: r#"{ "action": "stop", "id": "/root/inspect_tests", "force": false }"#,
        parse: |v| {
            Ok(ThreadRequest::Stop(Stop {
                id: v.text("id").unwrap_or_default(),
                force: v.boolean("force").unwrap_or(false),
            }))
        },
    },
    Action {
        name: "wait",
        required: &["id"],
        optional: &["detail", "timeoutMs"],
        shape: r#"{ "action": "wait", "id": "/root/inspect_tests", "timeoutMs": 30000 }"#,
        parse: |v| {
            Ok(ThreadRequest::Wait(Wait {
                id: v.text("id").unwrap_or_default(),
                detail: v.detail(),
                timeout_ms: v.timeout(),
            }))
        },
    },
    Action {
        name: "resume",
        required: &["id"],
        optional: &[],
        shape: r#"{ "action": "resume", "id": "/root/inspect_tests" }"#,
        parse: |v| {
            Ok(ThreadRequest::Resume(Resume {
                id: v.text("id").unwrap_or_default(),
            }))
        },
    },
    Action {
        name: "fork",
        required: &[],
        optional: &["id", "entryId", "position", "name", "taskName", "args"],
        shape: r#"{ "action": "fork", "id": "/root/inspect_tests", "position": "at", "taskName": "inspect_tests_branch" }"#,
        parse: |v| {
            Ok(ThreadRequest::Fork(Fork {
                id: v.text("id"),
                entry_id: v.text("entryId"),
                position: v.choice("position", POSITIONS).unwrap_or_default(),
                name: v.text("name"),
                task_name: v.task_name("taskName"),
                args: v.args("args"),
            }))
        },
    },
    Action {
        name: "archive",
        required: &["id"],
        optional: &["archived"],
        shape: r#"{ "action": "archive", "id": "/root/inspect_tests" }"#,
        parse: |v| {
            Ok(ThreadRequest::Archive(Archive {
                id: v.text("id").unwrap_or_default(),
                archived: v.boolean("archived").unwrap_or(true),
            }))
        },
    },
];

/// The action named `name`.
pub fn action(name: &str) -> Option<&'static Action> {
    ACTIONS.iter().find(|a| a.name == name)
}

const STATES: &[(&str, StateFilter)] = &[
    ("all", StateFilter::All),
    ("live", StateFilter::Live),
    ("closed", StateFilter::Closed),
];
const VISIBILITIES: &[(&str, VisibilityFilter)] = &[
    ("active", VisibilityFilter::Active),
    ("archived", VisibilityFilter::Archived),
    ("all", VisibilityFilter::All),
];
const DETAILS: &[(&str, Detail)] = &[
    ("summary", Detail::Summary),
    ("tail", Detail::Tail),
    ("full", Detail::Full),
];
const MODES: &[(&str, SendMode)] = &[
    ("prompt", SendMode::Prompt),
    ("steer", SendMode::Steer),
    ("follow_up", SendMode::FollowUp),
];
const POSITIONS: &[(&str, ForkPosition)] =
    &[("at", ForkPosition::At), ("before", ForkPosition::Before)];

fn invalid(action: &Action, problems: &[String]) -> Error {
    Error::invalid(format!(
        "Invalid thread parameters for {}: {}. Repair: use the {} shape {}.",
        action.name,
        problems.join("; "),
        action.name,
        action.shape
    ))
}

/// Parses and validates one `thread` call.
pub fn parse(params: &Value) -> Result<ThreadRequest> {
    let Some(obj) = params.as_object() else {
        return Err(Error::invalid(format!(
            "thread parameters must be a JSON object with an action field. Repair: use a shape such as {}.",
            ACTIONS[1].shape
        )));
    };
    let found = match obj.get("action") {
        Some(Value::String(a)) => action(a),
        _ => None,
    };
    let Some(action) = found else {
        let got = obj
            .get("action")
            .map(|v| v.to_string())
            .unwrap_or_else(|| "nothing".into());
        let names: Vec<&str> = ACTIONS.iter().map(|a| a.name).collect();
        let shapes: Vec<&str> = ACTIONS.iter().map(|a| a.shape).collect();
        return Err(Error::invalid(format!(
            "action must be one of {}; got {got}. Valid shapes: {}. Repair: pick one action and use its shape.",
            names.join(", "),
            shapes.join("; ")
        )));
    };
    let problems = FieldSet {
        required: action.required,
        optional: action.optional,
        ignored: &["action"],
        allowed_label: &format!("allowed for {}", action.name),
        null_is_missing: true,
    }
    .problems(obj);
    if !problems.is_empty() {
        return Err(invalid(action, &problems));
    }
    let mut v = Fields {
        obj,
        errors: Vec::new(),
    };
    let req = (action.parse)(&mut v)?;
    if !v.errors.is_empty() {
        v.errors.truncate(MAX_SCHEMA_ERRORS);
        return Err(invalid(action, &v.errors));
    }
    Ok(req)
}

pub struct Fields<'a> {
    obj: &'a Map<String, Value>,
    errors: Vec<String>,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.obj.get(key).filter(|v| !v.is_null())
    }

    /// A non-empty string.
    fn text(&mut self, key: &str) -> Option<String> {
        non_empty_text(self.get(key), key, &mut self.errors)
    }

    fn task_name(&mut self, key: &str) -> Option<String> {
        let t = self.text(key)?;
        if is_task_name(&t) {
            Some(t)
        } else {
            self.errors.push(format!(
                "{key} must be lower_snake_case: start with a lowercase letter or digit, then lowercase letters, digits or _ (max 64 chars); got {}",
                json_quote(&t)
            ));
            None
        }
    }

    /// One of the spellings in `allowed`, as its typed value.
    fn choice<T: Copy>(&mut self, key: &str, allowed: &[(&str, T)]) -> Option<T> {
        let t = self.text(key)?;
        match allowed.iter().find(|(name, _)| *name == t) {
            Some((_, value)) => Some(*value),
            None => {
                let names: Vec<&str> = allowed.iter().map(|(name, _)| *name).collect();
                self.errors.push(format!(
                    "{key} must be one of {}; got {}",
                    names.join(", "),
                    json_quote(&t)
                ));
                None
            }
        }
    }

    fn boolean(&mut self, key: &str) -> Option<bool> {
        match self.get(key) {
            None => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(other) => {
                self.errors
                    .push(format!("{key} must be a boolean, got {}", type_name(other)));
                None
            }
        }
    }

    fn args(&mut self, key: &str) -> Vec<String> {
        match self.get(key) {
            None => Vec::new(),
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            Some(_) => {
                self.errors
                    .push(format!("{key} must be an array of strings"));
                Vec::new()
            }
        }
    }

    fn detail(&mut self) -> Detail {
        self.choice("detail", DETAILS).unwrap_or_default()
    }

    fn timeout(&mut self) -> u64 {
        match self.get("timeoutMs") {
            None => DEFAULT_WAIT_MS,
            Some(v) => match v.as_u64().filter(|n| *n <= MAX_WAIT_MS) {
                Some(n) if v.is_u64() => n,
                _ => {
                    self.errors.push(format!(
                        "timeoutMs must be an integer from 0 to {MAX_WAIT_MS} milliseconds"
                    ));
                    DEFAULT_WAIT_MS
                }
            },
        }
    }
}

// ---- results ---------------------------------------------------------------------------------

/// A snapshot serialized once: results carry it twice (`snapshot` and its alias `thread`),
/// so both are this one text.
#[derive(Debug)]
pub struct SnapshotJson {
    pub json: Box<RawValue>,
    pub running: bool,
    pub detail: Detail,
    pub next_suggested_actions: &'static [&'static str],
}

impl SnapshotJson {
    pub fn new(snapshot: &Snapshot<'_>) -> Result<SnapshotJson> {
        Ok(SnapshotJson {
            json: serde_json::value::to_raw_value(snapshot)?,
            running: snapshot.running,
            detail: snapshot.detail,
            next_suggested_actions: snapshot.next_suggested_actions,
        })
    }
}

/// A poll's result: the headline and the snapshot of `facts` at `detail`, written into `w`.
pub fn poll_result(w: &mut dyn std::io::Write, facts: &ThreadFacts, detail: Detail) -> Result<()> {
    let projection = Projection::new(facts, detail);
    let snap = projection.snapshot();
    serde_json::to_writer(
        w,
        &super::ToolResult::new(
            &super::format::polled(&projection, &snap),
            Details::Polled {
                thread: Single::of(SnapshotJson::new(&snap)?),
            },
        ),
    )?;
    Ok(())
}

/// What the details of every single-thread result share: the snapshot (twice: `thread` is an
/// alias), `running`, `detail` and `nextSuggestedActions`.
#[derive(Debug)]
pub struct Single(SnapshotJson);

impl Single {
    pub fn of(snapshot: SnapshotJson) -> Single {
        Single(snapshot)
    }
}

impl Serialize for Single {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Shape<'a> {
            snapshot: &'a RawValue,
            thread: &'a RawValue,
            running: bool,
            detail: Detail,
            next_suggested_actions: &'static [&'static str],
        }
        let snapshot = &self.0;
        Shape {
            snapshot: &snapshot.json,
            thread: &snapshot.json,
            running: snapshot.running,
            detail: snapshot.detail,
            next_suggested_actions: snapshot.next_suggested_actions,
        }
        .serialize(s)
    }
}

/// The `details` of a single-thread result (and of `wait`'s progress), tagged by `kind`, each
/// kind's own fields after the shared ones.
#[derive(Debug, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum Details {
    Started {
        #[serde(flatten)]
        thread: Single,
        prompt_accepted: Option<bool>,
        note: Option<String>,
    },
    Polled {
        #[serde(flatten)]
        thread: Single,
    },
    Sent {
        #[serde(flatten)]
        thread: Single,
        mode: SendMode,
        accepted: Option<bool>,
        error: Option<String>,
    },
    Stopped {
        #[serde(flatten)]
        thread: Single,
        /// Always present, as in pi-threads: true on the no-op stop of a thread that was
        /// already closed, false on the stop that closed it.
        already_closed: bool,
    },
    Waited {
        #[serde(flatten)]
        thread: Single,
        timed_out: bool,
        waited_ms: u64,
    },
    Resumed {
        #[serde(flatten)]
        thread: Single,
        already_live: bool,
    },
    Forked {
        #[serde(flatten)]
        thread: Single,
        source_session_file: String,
        source_entry_id: Option<String>,
    },
    Archived {
        #[serde(flatten)]
        thread: Single,
        archived: bool,
    },
    /// `wait`'s progress notification: like every single-thread result (at the wait's
    /// detail), plus `waitedMs`; no `timeoutMs`, as in pi-threads.
    Waiting {
        #[serde(flatten)]
        thread: Single,
        waited_ms: u64,
    },
}

/// A listed summary snapshot's JSON as [`Wire::Compact`](super::Wire) sends it: its
/// `resultSummary`, which is always `result.text` again, as the placeholder `0` (the client
/// sets it back, in place, so the key keeps its position). Returns the pieces before and after
/// that member's string value (`None` when the snapshot has none); the writer puts
/// [`PLACEHOLDER`] between them. The key's bare quotes cannot occur inside a JSON string (a
/// string escapes its quotes), so the first match is the member itself.
pub fn compact_snapshot(json: &str) -> Option<(&str, &str)> {
    const MEMBER: &[u8] = b",\"resultSummary\":\"";
    // A SIMD substring search: `str::find` cost ~10k instructions a snapshot, more than the
    // rest of a listed thread (callgrind, list `ancestor` of 110).
    static FINDER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(MEMBER));
    let bytes = json.as_bytes();
    let value = FINDER.find(bytes)? + MEMBER.len() - 1;
    // The string value ends at the first quote not escaped by a backslash.
    let mut i = value + 1;
    while let Some(q) = memchr::memchr2(b'"', b'\\', &bytes[i..]) {
        let at = i + q;
        if bytes[at] == b'"' {
            return Some((&json[..value], &json[at + 1..]));
        }
        i = at + 2;
        if i > bytes.len() {
            return None;
        }
    }
    None
}

/// What [`Wire::Compact`](super::Wire) sends in place of a member that is a copy of another.
pub const PLACEHOLDER: &str = "0";

/// A list member in the wire's form: the list ([`Wire::Contract`](super::Wire)), or the
/// placeholder `0` ([`Wire::Compact`](super::Wire)), which the client replaces (see
/// [`Listed`]).
#[derive(Debug)]
pub enum Alias<'a, L: ?Sized> {
    Same(&'a L),
    Placeholder,
}

impl<L: ?Sized + Serialize> Serialize for Alias<'_, L> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Alias::Same(list) => list.serialize(s),
            Alias::Placeholder => s.serialize_u8(0),
        }
    }
}

/// `list`'s details. `threads` and `snapshots` (its alias) are the same list, written twice
/// (from one serialized text when the list is held in memory). With
/// [`Wire::Compact`](super::Wire) both are the placeholder `0`: the list crosses the pipe
/// once, in the part lines before the response line, and the client sets `threads` to their
/// concatenation and `snapshots` to the same array.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listed<'a, L: ?Sized> {
    pub kind: &'static str,
    pub threads: Alias<'a, L>,
    pub snapshots: Alias<'a, L>,
    pub count: usize,
    pub live_count: usize,
    pub closed_count: usize,
    pub detail: Detail,
}

impl<'a, L: ?Sized> Listed<'a, L> {
    pub fn new(threads: &'a L, count: usize, live_count: usize, wire: super::Wire) -> Self {
        let list = || match wire {
            super::Wire::Contract => Alias::Same(threads),
            super::Wire::Compact => Alias::Placeholder,
        };
        Listed {
            kind: "listed",
            threads: list(),
            snapshots: list(),
            count,
            live_count,
            closed_count: count - live_count,
            detail: Detail::Summary,
        }
    }
}

#[cfg(test)]
mod tests;
