//! Contract A result shaping: the `ThreadRuntimeSnapshot` of one thread at a detail level,
//! its `nextSuggestedActions` and its `ThreadExit`. Pure functions over rows already read;
//! no database access.
//!
//! The shapes are `Serialize` structs borrowing the rows ([`ThreadFacts`]): a [`Projection`]
//! holds the few texts a detail level derives (the result text, the output and stderr tails)
//! and hands out a [`Snapshot`] that serializes straight into the response line. No
//! `serde_json::Value` is built on the way.
//!
//! Character limits count UTF-16 code units (JavaScript's `length`), byte limits count UTF-8
//! bytes (see [`crate::text`]).
//!
//! Decisions where the contract and `contract-semantics.md` §1.8/§1.9 leave room:
//!
//! - **Key order** follows the contract's `ThreadRuntimeSnapshot` type: `id, path, name,
//!   taskName, status, phase, running, parentPath, parentThreadId, depth, archived, resumable,
//!   stale, cwd, args, createdAt, lastEventAt, session, detail, result, resultSummary?,
//!   recentEvents, nextSuggestedActions, pid?, exit?, outputTail?, outputCharCount?,
//!   outputTruncated?, stderrTail?, stderrTruncated?, lastAssistantText?, lastPartialText?`.
//!   `result` is `{status, source, text, charCount, truncated}` (the original's order),
//!   `session` is `{kind: "known", file, id, name, pendingMessageCount}` or
//!   `{kind: "unknown"}`, each event is `{seq, at, type, ...data}` (data keys in stored order;
//!   a data key named `seq`, `at` or `type` never overrides the envelope). Event data is
//!   passed through as stored (compact JSON, as `serde_json` wrote it), except the shortened
//!   assistant text.
//! - **Absent optional fields are omitted**, never `null`.
//! - `parentPath` is `row.parent_path`; when that is NULL it is derived from `path` (falling
//!   back to `/root`), so it is always a string as the contract types it.
//! - `pid` is emitted only for a live thread (the row keeps the last pid after close; upstream
//!   closed snapshots carry none). `exit` is emitted only for a closed thread with an exit.
//! - `phase` is the stored phase, not recomputed.
//! - **session**: known when the row has a session file and id (threadbase writes both
//!   before launching); `name` and `pendingMessageCount` are the child's last `get_state`
//!   answer (`sessionName`, `pendingMessageCount`, stored in `thread_output`), `null` before
//!   the first one. `resumable` = closed and known.
//! - **Result source**: `lastPartialText` when the thread is live and that text is non-blank,
//!   else `lastAssistantText` when non-blank; a blank assistant text counts as no source
//!   (`{status: ThreadStatus::None, source: "none", text: null, charCount: 0, truncated: false}`).
//!   `charCount` is the raw (uncompacted) source length in UTF-16 units; `truncated` is true
//!   when `text` is shorter than the compacted source (never at `full`).
//! - `recentEvents`: only `assistant_message.text` is shortened, compacted then cut (summary
//!   180, tail 700; full: as stored). Other fields are as stored.
//! - `tail`: `outputTail`/`outputCharCount`/`outputTruncated` are present only when there is
//!   a result source (output text); the output tail is the raw source text (not compacted).
//! - **stderr**: the row keeps the last bytes (`stderr_tail`) and the count cut before them
//!   (`stderr_dropped`). Leading UTF-8 continuation bytes left by that cut are skipped; an
//!   incomplete character at the very end (a read boundary of a live child) is not shown;
//!   other invalid bytes become U+FFFD. That is the retained text. stderr is "blank" when the
//!   retained text is whitespace only; blank stderr omits both stderr fields.
//!   - `full`: `stderrTail` is the retained text as it is, unmarked; `stderrTruncated` false.
//!   - `tail`: the last 4,000 units of the retained text; N = units this tail cut from the
//!     retained text (bytes dropped earlier by retention are not counted); when N > 0 the
//!     text is prefixed `[truncated first N chars]\n` and `stderrTruncated` is true.
//! - A tail never splits a surrogate pair, so it may hold 3,999 units; N counts the units
//!   actually cut.
//! - `lastAssistantText` (`full`) and `lastPartialText` (`full`, live only) are the raw
//!   retained texts, present when not NULL.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::domain::{ExitKind, Phase, ThreadStatus};
use crate::store::events::EventRow;
use crate::store::questions::Question;
use crate::store::threads::ThreadRow;
use crate::store::usage::Usage;
use crate::text::{compact, compact_cut_flagged, truncate_ellipsis, utf16_len, utf16_suffix};

pub use super::detail::{
    Detail, SUMMARY_EVENTS, SUMMARY_EVENT_TEXT_CHARS, SUMMARY_RESULT_CHARS, TAIL_EVENTS,
    TAIL_EVENT_TEXT_CHARS, TAIL_OUTPUT_CHARS, TAIL_RESULT_CHARS,
};
pub use super::events::{recent_event_count, RecentEvents};
pub use crate::store::output::OutputFacts;

pub use crate::store::facts::{Pending, ThreadFacts};

/// The texts one detail level derives from a thread's facts. [`Projection::snapshot`] borrows
/// them and the facts.
pub struct Projection<'a> {
    facts: &'a ThreadFacts,
    detail: Detail,
    source: Option<Source<'a>>,
    /// The compacted, cut result text as a JSON string.
    result_json: Option<Box<RawValue>>,
    /// The result text is shorter than the compacted source.
    result_truncated: bool,
    /// `tail`: the output tail (with its cut prefix), its full length and whether it was cut.
    output: Option<(String, usize, bool)>,
    /// `tail`/`full`: the stderr text shown and whether anything was cut.
    stderr: Option<(String, bool)>,
}

impl<'a> Projection<'a> {
    pub fn new(facts: &'a ThreadFacts, detail: Detail) -> Projection<'a> {
        let (row, out) = (&facts.row, &facts.out);
        let source = result_source(row, out);
        let result = source.map(|s| match detail {
            Detail::Summary => compact_cut_flagged(s.text, SUMMARY_RESULT_CHARS),
            Detail::Tail => compact_cut_flagged(s.text, TAIL_RESULT_CHARS),
            Detail::Full => (compact(s.text), false),
        });
        let result_truncated = result.as_ref().is_some_and(|r| r.1);
        // `result.text` and `resultSummary` are the same text: escaped once.
        let result_json = result
            .as_ref()
            .and_then(|(t, _)| serde_json::value::to_raw_value(t).ok());
        let (output, stderr) = match detail {
            Detail::Summary => (None, None),
            Detail::Tail => {
                // Only when there is output text: no source, no output fields.
                let output = source.map(|s| {
                    let (tail, cut) = tail_units(s.text, TAIL_OUTPUT_CHARS);
                    (with_cut_prefix(tail, cut), utf16_len(s.text), cut > 0)
                });
                let err = Stderr::decode(out);
                let stderr = (!err.is_blank()).then(|| {
                    // The prefix counts what this tail cut from the retained text only.
                    let (tail, cut) = tail_units(&err.text, TAIL_OUTPUT_CHARS);
                    (with_cut_prefix(tail, cut), cut > 0)
                });
                (output, stderr)
            }
            Detail::Full => {
                // The retained text as it is, unmarked.
                let err = Stderr::decode(out);
                let stderr = (!err.is_blank()).then_some((err.text, false));
                (None, stderr)
            }
        };
        Projection {
            facts,
            detail,
            source,
            result_json,
            result_truncated,
            output,
            stderr,
        }
    }

    /// The result lines of a `poll` or `wait` content text, as pi-threads writes them (each
    /// block starts with an empty line; none without output text):
    ///
    /// - `full`: `Last assistant output (full retained):` and the raw output text;
    /// - `tail`: `Assistant output tail[ (truncated)]:` and the output tail (raw, with its
    ///   line breaks and its `[truncated first N chars]` prefix);
    /// - `summary`: `Result summary (<charCount> chars[, truncated; use detail=tail or
    ///   detail=full for more]):` (`Current assistant summary` while partial) and the answer.
    ///   One deliberate improvement on the original, which shows the compacted
    ///   `result.text` here: the answer keeps its line breaks (trimmed, and when the compacted
    ///   text was cut, cut at the same 700 characters with `…`). `details` keep the
    ///   contract's compacted `result.text`.
    pub fn result_lines(&self, out: &mut String) {
        let Some(source) = self.source else {
            return;
        };
        match self.detail {
            Detail::Full => {
                out.push_str("\n\nLast assistant output (full retained):\n");
                out.push_str(source.text);
            }
            Detail::Tail => {
                if let Some((tail, _, cut)) = &self.output {
                    out.push_str(if *cut {
                        "\n\nAssistant output tail (truncated):\n"
                    } else {
                        "\n\nAssistant output tail:\n"
                    });
                    out.push_str(tail);
                }
            }
            Detail::Summary => {
                let label = if source.partial {
                    "Current assistant summary"
                } else {
                    "Result summary"
                };
                let text = source.text.trim();
                let _ = write!(out, "\n\n{label} ({} chars", utf16_len(source.text));
                if self.result_truncated {
                    out.push_str(", truncated; use detail=tail or detail=full for more");
                }
                out.push_str("):\n");
                if self.result_truncated {
                    out.push_str(&truncate_ellipsis(text, SUMMARY_RESULT_CHARS));
                } else {
                    out.push_str(text);
                }
            }
        }
    }

    /// The contract's `ThreadRuntimeSnapshot` (keys in the contract's order; see the module
    /// docs for every choice).
    pub fn snapshot(&self) -> Snapshot<'_> {
        let (row, out, detail) = (&self.facts.row, &self.facts.out, self.detail);
        let live = row.is_live();
        let parent_path = row
            .parent_path
            .as_deref()
            .or_else(|| crate::paths::parent_path(&row.path))
            .unwrap_or("/root");
        let text = self.result_json.as_deref();
        let (status, source, char_count) = match self.source {
            Some(s) if s.partial => (
                ResultStatus::Partial,
                ResultSource::AssistantPartial,
                utf16_len(s.text),
            ),
            Some(s) => (
                ResultStatus::Completed,
                ResultSource::AssistantMessage,
                utf16_len(s.text),
            ),
            None => (ResultStatus::None, ResultSource::None, 0),
        };
        let full = detail == Detail::Full;
        Snapshot {
            id: row.id.as_str(),
            path: &row.path,
            name: &row.name,
            task_name: &row.task_name,
            status: row.status(),
            phase: row.phase(),
            running: live,
            parent_path,
            parent_thread_id: row.parent_id.as_ref().map(crate::domain::ThreadId::as_str),
            depth: row.depth,
            archived: row.archived,
            resumable: !live && session_known(row),
            stale: row.exit().map(|x| x.kind) == Some(ExitKind::Stale),
            cwd: &row.cwd,
            args: &row.args,
            created_at: &row.created_at,
            last_event_at: &row.last_event_at,
            session: session_of(row, out),
            detail,
            result: ResultSummary {
                status,
                source,
                text,
                char_count,
                truncated: self.result_truncated,
            },
            result_summary: text,
            recent_events: RecentEvents::new(&self.facts.events, detail),
            next_suggested_actions: match (&self.facts.pending, live) {
                (p, true) if p.question.is_some() => ANSWER_ACTIONS,
                (p, true) if p.queue_position.is_some() => QUEUED_ACTIONS,
                _ => next_suggested_actions(row),
            },
            pid: if live { row.pid } else { None },
            exit: if live { None } else { exit_of(row) },
            output_tail: self.output.as_ref().map(|o| o.0.as_str()),
            output_char_count: self.output.as_ref().map(|o| o.1),
            output_truncated: self.output.as_ref().map(|o| o.2),
            stderr_tail: self.stderr.as_ref().map(|e| e.0.as_str()),
            stderr_truncated: self.stderr.as_ref().map(|e| e.1),
            last_assistant_text: out.last_assistant_text.as_deref().filter(|_| full),
            last_partial_text: out.last_partial_text.as_deref().filter(|_| full && live),
            spend: self.facts.usage,
            queue_position: self.facts.pending.queue_position.filter(|_| live),
            question: self.facts.pending.question.as_ref().filter(|_| live),
            host_unreachable: self.facts.pending.unreachable.as_ref().filter(|_| live),
            attention: self.facts.attention.as_ref(),
            worktree: self.facts.worktree.as_ref().map(|w| &w.row),
            worktree_stat: self.facts.worktree.as_ref().and_then(|w| w.stat),
        }
    }
}

/// `nextSuggestedActions` of a live thread whose question waits for an answer.
pub const ANSWER_ACTIONS: &[&str] = &["thread_answer", "poll", "stop"];
/// `nextSuggestedActions` of a thread waiting in the queue.
pub const QUEUED_ACTIONS: &[&str] = &["wait", "poll", "stop"];

/// The contract's `ThreadRuntimeSnapshot`, borrowed from a [`Projection`].
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot<'a> {
    pub id: &'a str,
    pub path: &'a str,
    pub name: &'a str,
    pub task_name: &'a str,
    pub status: ThreadStatus,
    /// The row's phase: `queued` while the thread waits for a slot (THREADBASE_QUEUE=1).
    pub phase: Phase,
    pub running: bool,
    pub parent_path: &'a str,
    pub parent_thread_id: Option<&'a str>,
    pub depth: i64,
    pub archived: bool,
    pub resumable: bool,
    pub stale: bool,
    pub cwd: &'a str,
    pub args: &'a [String],
    pub created_at: &'a str,
    pub last_event_at: &'a str,
    pub session: Session<'a>,
    pub detail: Detail,
    pub result: ResultSummary<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_summary: Option<&'a RawValue>,
    pub recent_events: RecentEvents<'a>,
    pub next_suggested_actions: &'static [&'static str],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit: Option<Exit<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tail: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_char_count: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_assistant_text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_partial_text: Option<&'a str>,
    /// What the thread itself spent, for the texts ([`crate::contract::format::spend`]); not
    /// part of the contract's snapshot, so never serialized.
    #[serde(skip)]
    pub spend: Usage,
    /// Issue 30, `THREADBASE_QUEUE=1`: a live thread waiting for a slot, at this position.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<i64>,
    /// Issue 30, `THREADBASE_UI=parent`: the child's question waiting for the parent's answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<&'a Question>,
    /// Issue 33, a team database: the live thread's host, whose lease ran out, and since when
    /// (`{hostId, since}`); absent while its host is up, and on one host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_unreachable: Option<&'a crate::store::hosts::Unreachable>,
    /// Issue 45: what needs the user about the thread, as the view `thread_attention` says
    /// (`{attention, since, detail}`, `attention` one of `asking`, `failed`, `stalled`,
    /// `unreachable`, `owner_gone`); absent when nothing does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attention: Option<&'a crate::store::attention::Need>,
    /// Issue 48, `THREADBASE_ISOLATION=worktree`: the thread's git worktree (`{repo, path,
    /// branch, baseCommit, createdAt, removedAt?}`, its `thread_worktrees` row); absent for a
    /// thread that is not isolated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<&'a crate::store::worktrees::WorktreeRow>,
    /// What the isolated thread changed since its base, when git was asked (poll, wait,
    /// start): the texts' `Worktree:` line ([`crate::contract::format::worktree_line`]); not
    /// part of the snapshot, so never serialized.
    #[serde(skip)]
    pub worktree_stat: Option<crate::worktree::Stat>,
}

/// `session`: `{kind: "known", file, id, name, pendingMessageCount}` once the child's session
/// file and id are known (`name` and `pendingMessageCount` from its last `get_state` answer,
/// `null` before one), else `{kind: "unknown"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(
    tag = "kind",
    rename_all = "lowercase",
    rename_all_fields = "camelCase"
)]
pub enum Session<'a> {
    Known {
        file: &'a str,
        id: &'a str,
        name: Option<&'a str>,
        pending_message_count: Option<i64>,
    },
    Unknown,
}

/// A thread's session: known when its session file and id are.
pub fn session_of<'a>(row: &'a ThreadRow, out: &'a OutputFacts) -> Session<'a> {
    match (row.session_file.as_deref(), row.session_id.as_deref()) {
        (Some(file), Some(id)) => Session::Known {
            file,
            id,
            name: out.session_name.as_deref(),
            pending_message_count: out.pending_message_count,
        },
        _ => Session::Unknown,
    }
}

/// `session.kind == "known"`: what `resumable` and `nextSuggestedActions` ask.
fn session_known(row: &ThreadRow) -> bool {
    row.session_file.is_some() && row.session_id.is_some()
}

/// `result`: `{status, source, text, charCount, truncated}`, the original's key order.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultSummary<'a> {
    pub status: ResultStatus,
    pub source: ResultSource,
    /// The text as a JSON string.
    pub text: Option<&'a RawValue>,
    pub char_count: usize,
    /// `text` is shorter than the compacted source (never at `full`, nor without a source).
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultStatus {
    Partial,
    Completed,
    None,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultSource {
    AssistantPartial,
    AssistantMessage,
    None,
}

/// The contract's `ThreadExit`: `{kind, message}` for `failed`/`stale`, `{kind, code, signal}`
/// for `exited`/`stopped`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Exit<'a> {
    Exited {
        code: Option<i64>,
        signal: Option<&'a str>,
    },
    Stopped {
        code: Option<i64>,
        signal: Option<&'a str>,
    },
    Failed {
        message: Option<&'a str>,
    },
    Stale {
        message: Option<&'a str>,
    },
}

/// A closed thread's exit; `None` while live.
pub fn exit_of(row: &ThreadRow) -> Option<Exit<'_>> {
    let x = row.exit()?;
    let (code, signal, message) = (x.code, x.signal.as_deref(), x.message.as_deref());
    Some(match x.kind {
        ExitKind::Exited => Exit::Exited { code, signal },
        ExitKind::Stopped => Exit::Stopped { code, signal },
        ExitKind::Failed => Exit::Failed { message },
        ExitKind::Stale => Exit::Stale { message },
    })
}

/// The contract's `ThreadExit` as a JSON value (for the inspection CLI and tests).
pub fn exit_json(row: &ThreadRow) -> Option<Value> {
    exit_of(row).and_then(|e| serde_json::to_value(e).ok())
}

/// The contract's `ThreadRuntimeSnapshot` of one thread as a JSON value, for the readers that
/// walk it (the web page's detail, tests), with what needs the user about it (issue 45);
/// serve writes [`Snapshot`] directly.
pub fn snapshot(
    row: &ThreadRow,
    out: &OutputFacts,
    events: &[EventRow],
    detail: Detail,
    attention: Option<crate::store::attention::Need>,
) -> Value {
    let facts = ThreadFacts {
        row: row.clone(),
        out: out.clone(),
        events: events.to_vec(),
        usage: Usage::default(),
        pending: Pending::default(),
        attention,
        worktree: None,
    };
    serde_json::to_value(Projection::new(&facts, detail).snapshot()).unwrap_or(Value::Null)
}

/// `nextSuggestedActions` (§1.8).
pub fn next_suggested_actions(row: &ThreadRow) -> &'static [&'static str] {
    let live = row.is_live();
    if row.archived {
        return if live {
            &["unarchive", "poll"]
        } else {
            &["unarchive", "list"]
        };
    }
    if !live {
        return if session_known(row) {
            &["resume", "fork", "archive", "list"]
        } else {
            &["archive", "list"]
        };
    }
    match row.phase() {
        Phase::Idle => &["send prompt", "poll", "stop"],
        Phase::Stopping => &["poll", "wait"],
        Phase::Starting | Phase::Queued | Phase::Busy | Phase::Failed | Phase::Stale => {
            &["wait", "poll", "send follow_up", "stop"]
        }
    }
}

#[derive(Clone, Copy)]
struct Source<'a> {
    text: &'a str,
    partial: bool,
}

fn result_source<'a>(row: &ThreadRow, out: &'a OutputFacts) -> Option<Source<'a>> {
    let non_blank = |t: &'a Option<String>| t.as_deref().filter(|s| !s.trim().is_empty());
    if row.is_live() {
        if let Some(text) = non_blank(&out.last_partial_text) {
            return Some(Source {
                text,
                partial: true,
            });
        }
    }
    non_blank(&out.last_assistant_text).map(|text| Source {
        text,
        partial: false,
    })
}

/// The last `limit` UTF-16 units of `s` and how many units were cut before them.
fn tail_units(s: &str, limit: usize) -> (&str, u64) {
    let len = utf16_len(s);
    if len <= limit {
        return (s, 0);
    }
    let tail = utf16_suffix(s, limit);
    (tail, (len - utf16_len(tail)) as u64)
}

fn with_cut_prefix(tail: &str, cut: u64) -> String {
    if cut == 0 {
        tail.to_string()
    } else {
        format!("[truncated first {cut} chars]\n{tail}")
    }
}

/// Retained stderr as text.
struct Stderr {
    text: String,
}

impl Stderr {
    fn decode(out: &OutputFacts) -> Stderr {
        let mut bytes = out.stderr_tail.as_slice();
        if out.stderr_dropped > 0 {
            // The retention cut may have split a character: skip its continuation bytes.
            let lead = bytes
                .iter()
                .take(3)
                .take_while(|b| (0x80..0xC0).contains(*b))
                .count();
            bytes = &bytes[lead..];
        }
        bytes = &bytes[..bytes.len() - incomplete_suffix(bytes)];
        Stderr {
            text: String::from_utf8_lossy(bytes).into_owned(),
        }
    }

    fn is_blank(&self) -> bool {
        self.text.trim().is_empty()
    }
}

/// Length of a trailing, incomplete UTF-8 sequence (a character still being read), else 0.
fn incomplete_suffix(b: &[u8]) -> usize {
    for back in 1..=b.len().min(4) {
        let x = b[b.len() - back];
        if x & 0xC0 == 0x80 {
            continue;
        }
        let need = match x {
            0xF0..=0xF7 => 4,
            0xE0..=0xEF => 3,
            0xC0..=0xDF => 2,
            _ => 1,
        };
        return if need > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests;
