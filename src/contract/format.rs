//! Contract A's `content` texts: what the model reads of each `thread` result, the
//! multi-line blocks pi-threads writes (`src/format.ts` of phongndo/pi-threads), built from
//! the same [`Snapshot`] the `details` carry.
//!
//! - A thread's **title** is its session name (from the child's `get_state`), else its display
//!   name when that is neither its id nor its taskName, else its taskName with `_` as spaces,
//!   else its path's basename so, else the short id (`thread_` + 6 hex digits).
//! - Its **status** is `live/<phase> pid=<pid>` (`live/<phase>` while the pid is unknown), or
//!   `closed/stale`, `closed/failed` (a failed exit, or an exit with a non-zero code or a
//!   signal), else `closed/<exit kind>`.
//! - `Next: a, b, or c` lists `nextSuggestedActions`.
//!
//! One deliberate improvement on the original: at `summary`, the result text keeps its line
//! breaks ([`Projection::result_lines`]).

use crate::domain::{ExitKind, ThreadStatus};
use std::borrow::Cow;
use std::fmt::{self, Write as _};

use serde_json::Value;

use crate::contract::projection::{Exit, Projection, Session, Snapshot};
use crate::runtime::SendMode;
use crate::store::usage::Usage;

/// `list`'s text when it lists nothing.
pub const NO_THREADS: &str = "No Pi threads are managed by this parent session.";

/// `list`'s text has a line for at most this many threads (`details.threads` has them all):
/// past that a model would not read the text through, so the text says what it left out and
/// how to narrow the list instead ([`list_more`]).
pub const MAX_LIST_LINES: usize = 200;

/// The last line of a `list` text that lists `shown` of `count` threads (after a line break).
pub fn list_more(f: &mut dyn fmt::Write, shown: usize, count: usize) -> fmt::Result {
    write!(
        f,
        "\n… and {} more not shown: this text lists the first {shown} of {count} threads (details.threads has every one). Narrow the list with {{ \"action\": \"list\", \"parent\": \"<path>\" }} or {{ \"action\": \"list\", \"ancestor\": \"<path>\" }}, or run `threadbase list` in a shell.",
        count - shown
    )
}

/// A thread's title (see the module docs).
pub fn title<'a>(snap: &Snapshot<'a>) -> Cow<'a, str> {
    if let Session::Known {
        name: Some(name), ..
    } = snap.session
    {
        let name = name.trim();
        if !name.is_empty() {
            return Cow::Borrowed(name);
        }
    }
    let name = snap.name.trim();
    if !name.is_empty() && name != snap.id && name != snap.task_name {
        return Cow::Borrowed(name);
    }
    let task = snap.task_name.trim();
    if !task.is_empty() && task != snap.id {
        return Cow::Owned(task.replace('_', " "));
    }
    let base = snap.path.rsplit('/').next().unwrap_or(snap.path).trim();
    if base != snap.id && !base.is_empty() {
        return Cow::Owned(base.replace('_', " "));
    }
    Cow::Borrowed(snap.id.get(..13).unwrap_or(snap.id))
}

/// A thread's status (see the module docs).
pub fn status(snap: &Snapshot<'_>) -> String {
    if snap.running {
        let word = match snap.attention {
            Some(need) => need.word(),
            None => snap.phase.as_str(),
        };
        return match snap.pid {
            Some(pid) => format!("live/{word} pid={pid}"),
            None => format!("live/{word}"),
        };
    }
    // The words every surface uses (a stop's code and signal never make it `failed`).
    let (kind, code, signalled) = match snap.exit {
        Some(Exit::Stale { .. }) => (Some(ExitKind::Stale), None, false),
        Some(Exit::Failed { .. }) => (Some(ExitKind::Failed), None, false),
        Some(Exit::Exited { code, signal }) => (Some(ExitKind::Exited), code, signal.is_some()),
        Some(Exit::Stopped { .. }) => (Some(ExitKind::Stopped), None, false),
        None => (None, None, false),
    };
    crate::domain::state_words(
        ThreadStatus::Closed,
        snap.phase,
        kind,
        code,
        signalled,
        snap.attention.map(|n| n.attention),
    )
}

/// What a live thread waits for (issue 30), after a line break each: its place in the queue,
/// and its question with how to answer it.
pub fn waiting_lines(s: &mut String, snap: &Snapshot<'_>) {
    if let Some(u) = snap.host_unreachable {
        let _ = write!(
            s,
            "\nHost: {} unreachable since {} (no serve of it renewed its lease within {} s); this thread's rows stay as they were, and a send, stop or resume cannot reach it. Repair: wait until host {} is back (its next serve restores its threads), or run `threadbase host forget {}` to close its threads as stale.",
            u.host_id,
            u.since,
            crate::store::hosts::LEASE.as_secs(),
            u.host_id,
            u.host_id
        );
    }
    if let Some(n) = snap.queue_position {
        let _ = write!(
            s,
            "\nQueued: position {n}; it launches when a live thread of this session closes (THREADBASE_QUEUE=1). Wait on it, or stop it to take it out of the queue."
        );
    }
    if let Some(q) = snap.question {
        let _ = write!(s, "\nQuestion ({}) waiting for your answer", q.kind);
        if let Some(t) = q.title.as_deref().filter(|t| !t.trim().is_empty()) {
            let _ = write!(s, ": {t}");
        }
        if let Some(m) = q.message.as_deref().filter(|m| !m.trim().is_empty()) {
            let _ = write!(s, "\n{m}");
        }
        if let Some(options) = q.options.as_deref() {
            let _ = write!(s, "\nOptions: {}", options.join(" | "));
        }
        let example = match q.kind {
            crate::domain::QuestionKind::Confirm => "true".to_string(),
            crate::domain::QuestionKind::Select => crate::paths::json_quote(
                q.options
                    .as_deref()
                    .and_then(|o| o.first())
                    .map_or("<option>", String::as_str),
            ),
            _ => "\"<text>\"".to_string(),
        };
        let how = match q.kind {
            crate::domain::QuestionKind::Confirm => "true for yes, false for no",
            crate::domain::QuestionKind::Select => "one of the options, exactly",
            _ => "a string",
        };
        let _ = write!(
            s,
            "\nAnswer with the thread_answer tool: {{ \"id\": \"{}\", \"answer\": {example} }} ({how}). The child waits until it is answered.",
            snap.id
        );
    }
}

/// `Next: a, b, or c` (`Next: none` for no action).
pub fn next_line(actions: &[&str]) -> String {
    match actions {
        [] => "Next: none".into(),
        [one] => format!("Next: {one}"),
        [init @ .., last] => format!("Next: {}, or {last}", init.join(", ")),
    }
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// What a thread itself spent, for the poll, wait and list texts: `12.3k tokens, $0.0123`
/// (tokens as Pi's `totalTokens` counts them: input, output, cache reads and writes; the cost
/// only when it is not zero). `None` while it has spent nothing: the texts then show no spend.
pub fn spend(u: &Usage) -> Option<String> {
    let tokens = u.total_tokens();
    if tokens == 0 && u.cost_usd <= 0.0 {
        return None;
    }
    let mut s = format!("{} tokens", crate::text::compact_count(tokens));
    if u.cost_usd > 0.0 {
        let _ = write!(s, ", ${:.4}", u.cost_usd);
    }
    Some(s)
}

/// One line of `list`'s text: `<title> <path> - <status>[ archived][, <spend>] [id: <id>]`,
/// after a line break unless it is the first.
pub fn list_line(f: &mut dyn fmt::Write, first: bool, snap: &Snapshot<'_>) -> fmt::Result {
    if !first {
        f.write_char('\n')?;
    }
    write!(
        f,
        "{} {} - {}{}",
        title(snap),
        snap.path,
        status(snap),
        if snap.archived { " archived" } else { "" },
    )?;
    if let Some(n) = snap.queue_position {
        write!(f, " queued #{n}")?;
    }
    if let Some(q) = snap.question {
        write!(f, " question pending ({})", q.kind)?;
    }
    if let Some(u) = snap.host_unreachable {
        write!(f, " host {} unreachable since {}", u.host_id, u.since)?;
    }
    if let Some(spent) = spend(&snap.spend) {
        write!(f, ", {spent}")?;
    }
    write!(f, " [id: {}]", snap.id)
}

/// `start`'s text.
pub fn started(snap: &Snapshot<'_>, prompt_accepted: Option<bool>, note: Option<&str>) -> String {
    let mut s = format!(
        "Started Pi thread \"{}\".\nPath: {}\nID: {}\nStatus: {}\nPrompt accepted: {}",
        title(snap),
        snap.path,
        snap.id,
        status(snap),
        yes_no(prompt_accepted == Some(true))
    );
    if let Some(note) = note {
        let _ = write!(s, "\nNote: {note}");
    }
    if let Some(line) = worktree_line(snap) {
        let _ = write!(s, "\n{line}");
    }
    waiting_lines(&mut s, snap);
    let _ = write!(
        s,
        "\nPoll with: {{ \"action\": \"poll\", \"id\": \"{}\" }}",
        snap.path
    );
    s
}

/// `poll`'s text: the thread's header lines, the result lines, the recent events and the
/// stderr tail.
pub fn polled(projection: &Projection<'_>, snap: &Snapshot<'_>) -> String {
    let mut s = format!(
        "Pi thread \"{}\"\nPath: {}\nID: {}\nParent: {}",
        title(snap),
        snap.path,
        snap.id,
        snap.parent_path
    );
    if let Some(parent) = snap.parent_thread_id.filter(|p| !p.is_empty()) {
        let _ = write!(s, " ({parent})");
    }
    let _ = write!(s, "\nDepth: {}\nStatus: {}", snap.depth, status(snap));
    spent_line(&mut s, snap);
    waiting_lines(&mut s, snap);
    let _ = write!(
        s,
        "\nRunning: {}\n{}\nCwd: {}\nDetail: {}",
        yes_no(snap.running),
        next_line(snap.next_suggested_actions),
        snap.cwd,
        snap.detail.as_str()
    );
    if let Session::Known { file, .. } = snap.session {
        let _ = write!(s, "\nSession: {file}");
    }
    projection.result_lines(&mut s);
    let mut events = snap.recent_events.shown().peekable();
    if events.peek().is_some() {
        s.push_str("\n\nRecent events:");
        for (e, data) in events {
            s.push_str("\n- ");
            event_line(&mut s, e.seq, &e.at, &e.kind, &data);
        }
    }
    if let Some(tail) = snap.stderr_tail.filter(|t| !t.trim().is_empty()) {
        s.push_str(if snap.stderr_truncated == Some(true) {
            "\n\nstderr tail (truncated):\n"
        } else {
            "\n\nstderr tail:\n"
        });
        s.push_str(tail);
    }
    s
}

/// `wait`'s text.
pub fn waited(
    projection: &Projection<'_>,
    snap: &Snapshot<'_>,
    timed_out: bool,
    waited_ms: u64,
) -> String {
    let mut s = format!(
        "Wait {} after {waited_ms}ms for \"{}\".\nPath: {}\nStatus: {}",
        if timed_out { "timed out" } else { "completed" },
        title(snap),
        snap.path,
        status(snap),
    );
    spent_line(&mut s, snap);
    waiting_lines(&mut s, snap);
    let _ = write!(
        s,
        "\nRunning: {}\n{}\nDetail: {}",
        yes_no(snap.running),
        next_line(snap.next_suggested_actions),
        snap.detail.as_str()
    );
    projection.result_lines(&mut s);
    s
}

/// `Spent: <spend>` after a line break, when the thread has spent anything ([`spend`]); then
/// an isolated thread's `Worktree:` line ([`worktree_line`]).
fn spent_line(s: &mut String, snap: &Snapshot<'_>) {
    if let Some(spent) = spend(&snap.spend) {
        let _ = write!(s, "\nSpent: {spent}");
    }
    if let Some(line) = worktree_line(snap) {
        let _ = write!(s, "\n{line}");
    }
}

/// Issue 48: an isolated thread's worktree, relative to its repository, with its branch and
/// what it changed since its base (`Worktree: .threadbase/worktrees/fix_auth-3f2a (branch
/// threadbase/fix_auth-3f2a): 3 files changed, +40 −2`); `removed <at>` once `worktree clean`
/// removed it. `None` for a thread that is not isolated.
pub fn worktree_line(snap: &Snapshot<'_>) -> Option<String> {
    let w = snap.worktree?;
    let mut s = format!("Worktree: {} (branch {})", w.shown_path(), w.branch);
    if let Some(at) = &w.removed_at {
        let _ = write!(s, ": removed {at}");
    } else if let Some(st) = snap.worktree_stat {
        let _ = write!(s, ": {}", stat_text(&st));
    }
    Some(s)
}

/// `3 files changed, +40 −2` (`no changes` when nothing changed).
pub fn stat_text(st: &crate::worktree::Stat) -> String {
    if st.files == 0 {
        return "no changes".to_string();
    }
    format!(
        "{} file{} changed, +{} \u{2212}{}",
        st.files,
        if st.files == 1 { "" } else { "s" },
        st.insertions,
        st.deletions
    )
}

/// `send`'s text.
pub fn sent(
    snap: &Snapshot<'_>,
    mode: SendMode,
    accepted: Option<bool>,
    error: Option<&str>,
) -> String {
    let mut s = format!(
        "Sent message to \"{}\" with mode {}.\nPath: {}\nAccepted: {}\nStatus: {}",
        title(snap),
        mode.as_str(),
        snap.path,
        match accepted {
            Some(true) => "yes",
            Some(false) => "no",
            None => "unknown",
        },
        status(snap)
    );
    if let Some(error) = error {
        let _ = write!(s, "\nError: {error}");
    }
    s
}

/// `stop`'s text.
pub fn stopped(snap: &Snapshot<'_>, already_closed: bool) -> String {
    format!(
        "{} \"{}\".\nPath: {}\nStatus: {}",
        if already_closed {
            "Already closed"
        } else {
            "Stopped"
        },
        title(snap),
        snap.path,
        status(snap)
    )
}

/// `resume`'s text.
pub fn resumed(snap: &Snapshot<'_>, already_live: bool) -> String {
    format!(
        "{} \"{}\".\nPath: {}\nID: {}\nStatus: {}\n{}",
        if already_live {
            "Thread already live"
        } else {
            "Resumed Pi thread"
        },
        title(snap),
        snap.path,
        snap.id,
        status(snap),
        next_line(snap.next_suggested_actions)
    )
}

/// `fork`'s text.
pub fn forked(snap: &Snapshot<'_>, source_file: &str, source_entry: Option<&str>) -> String {
    format!(
        "Forked Pi thread \"{}\".\nPath: {}\nID: {}\nSource session: {source_file}\nSource entry: {}\nStatus: {}\n{}",
        title(snap),
        snap.path,
        snap.id,
        source_entry.unwrap_or("leaf/root"),
        status(snap),
        next_line(snap.next_suggested_actions)
    )
}

/// `archive`'s text.
pub fn archived(snap: &Snapshot<'_>, archived: bool) -> String {
    format!(
        "{} \"{}\".\nPath: {}\nStatus: {}\n{}",
        if archived { "Archived" } else { "Unarchived" },
        title(snap),
        snap.path,
        status(snap),
        next_line(snap.next_suggested_actions)
    )
}

/// One recent event: `<at> #<seq> <what>`.
pub fn event_line(s: &mut String, seq: i64, at: &str, kind: &str, data: &Value) {
    let text = |k: &str| data.get(k).and_then(Value::as_str).unwrap_or("");
    let pid = || match data.get("pid") {
        Some(Value::Number(n)) => n.to_string(),
        _ => "null".into(),
    };
    let _ = write!(s, "{at} #{seq} ");
    let _ = match kind {
        "thread_started" => write!(s, "thread started pid={}", pid()),
        "thread_resumed" => write!(s, "thread resumed pid={}", pid()),
        "thread_forked" => {
            let _ = write!(
                s,
                "thread forked pid={} source={}",
                pid(),
                text("sourceSessionFile")
            );
            match data.get("sourceEntryId").and_then(Value::as_str) {
                Some(entry) => write!(s, " entry={entry}"),
                None => Ok(()),
            }
        }
        "thread_archived" => write!(
            s,
            "thread {}",
            if data.get("archived") == Some(&Value::Bool(false)) {
                "unarchived"
            } else {
                "archived"
            }
        ),
        "thread_stopping" => write!(s, "thread stopping"),
        "turn_started" => write!(s, "turn started"),
        "turn_completed" => write!(s, "turn completed"),
        "tool_started" => write!(s, "tool started: {}", text("toolName")),
        "tool_completed" => write!(
            s,
            "tool completed: {}{}",
            text("toolName"),
            if data.get("error") == Some(&Value::Bool(true)) {
                " (error)"
            } else {
                ""
            }
        ),
        "assistant_message" => {
            write!(
                s,
                "assistant: {}",
                trim_for_display(&text("text").replace('\n', " "), 240)
            )
        }
        "ui_request" => {
            let _ = write!(s, "ui {}", text("method"));
            if let Some(t) = data
                .get("title")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                let _ = write!(s, ": {t}");
            }
            if data.get("autoCancelled") == Some(&Value::Bool(true)) {
                s.push_str(" (auto-cancelled)");
            }
            Ok(())
        }
        "thread_closed" => write!(s, "thread closed: {}", exit_text(&data["exit"])),
        "thread_adopted" => write!(
            s,
            "thread adopted from Pi session {} (its path there: {})",
            text("fromSession"),
            text("oldPath")
        ),
        "thread_error" => write!(s, "error: {}", text("message")),
        other => write!(s, "{}", other.replace('_', " ")),
    };
}

/// `failed (message)`, `stale (message)`, `exited (code 0)`, `stopped (signal SIGKILL)`, ….
fn exit_text(exit: &Value) -> String {
    let kind = exit
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    match ExitKind::parse(kind) {
        Some(ExitKind::Failed | ExitKind::Stale) => format!(
            "{kind} ({})",
            exit.get("message").and_then(Value::as_str).unwrap_or("")
        ),
        Some(ExitKind::Exited | ExitKind::Stopped) | None => {
            let mut parts = Vec::new();
            if let Some(Value::Number(code)) = exit.get("code") {
                parts.push(format!("code {code}"));
            }
            if let Some(signal) = exit.get("signal").and_then(Value::as_str) {
                parts.push(format!("signal {signal}"));
            }
            if parts.is_empty() {
                kind.to_string()
            } else {
                format!("{kind} ({})", parts.join(", "))
            }
        }
    }
}

/// The text when it has at most `max` UTF-16 units, else its first `max` and
/// `\n[truncated N chars]`.
fn trim_for_display(text: &str, max: usize) -> String {
    let len = crate::text::utf16_len(text);
    if len <= max {
        return text.to_string();
    }
    let head = crate::text::utf16_prefix(text, max);
    format!(
        "{head}\n[truncated {} chars]",
        len - crate::text::utf16_len(head)
    )
}

#[cfg(test)]
mod tests;
