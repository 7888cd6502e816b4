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
        return match snap.pid {
            Some(pid) => format!("live/{} pid={pid}", snap.phase),
            None => format!("live/{}", snap.phase),
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
        false,
    )
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

/// `Spent: <spend>` after a line break, when the thread has spent anything ([`spend`]).
fn spent_line(s: &mut String, snap: &Snapshot<'_>) {
    if let Some(spent) = spend(&snap.spend) {
        let _ = write!(s, "\nSpent: {spent}");
    }
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
mod tests {
    use super::*;
    use crate::contract::projection::{Detail, OutputFacts, ThreadFacts};
    use crate::domain::{Exit, ExitKind, ManagerId, Phase, ThreadState};
    use crate::store::events::EventRow;
    use crate::store::threads::ThreadRow;

    /// pi-threads `test/format.test.ts`'s `liveThread()`: idle, pid 123, session unknown.
    fn live() -> ThreadRow {
        ThreadRow {
            id: "thread_012345abcdef".into(),
            manager_id: ManagerId(1),
            path: "/root/inspect_repo".into(),
            parent_path: Some("/root".into()),
            task_name: "inspect_repo".into(),
            name: "inspect_repo".into(),
            depth: 1,
            cwd: "/tmp/project".into(),
            state: ThreadState::Live { phase: Phase::Idle },
            pid: Some(123),
            pgid: Some(123),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            last_event_at: "2026-01-01T00:00:00.000Z".into(),
            ..ThreadRow::default()
        }
    }

    /// Its `closedThread()`: exited with code 0.
    fn closed() -> ThreadRow {
        let mut r = live();
        r.state = ThreadState::Closed {
            phase: r.phase(),
            exit: Exit {
                kind: ExitKind::Exited,
                code: Some(0),
                signal: None,
                message: None,
            },
        };
        r
    }

    fn facts(row: ThreadRow, out: OutputFacts) -> ThreadFacts {
        ThreadFacts {
            row,
            out,
            events: vec![],
            usage: Default::default(),
        }
    }

    fn with<T>(f: &ThreadFacts, detail: Detail, g: impl FnOnce(&Projection<'_>) -> T) -> T {
        g(&Projection::new(f, detail))
    }

    fn title_of(f: &ThreadFacts) -> String {
        with(f, Detail::Summary, |p| title(&p.snapshot()).into_owned())
    }

    fn status_of(f: &ThreadFacts) -> String {
        with(f, Detail::Summary, |p| status(&p.snapshot()))
    }

    #[test]
    fn golden_titles() {
        // "prefers generated session names for display titles"
        let mut row = live();
        row.session_file = Some("/tmp/session.jsonl".into());
        row.session_id = Some("session-1".into());
        let out = OutputFacts {
            session_name: Some("Review failing tests".into()),
            ..OutputFacts::default()
        };
        assert_eq!(title_of(&facts(row, out)), "Review failing tests");
        // "falls back to humanized task names instead of opaque ids"
        let mut row = live();
        row.id = "thread_111111111111".into();
        row.name = "thread_111111111111".into();
        row.task_name = "review_tests".into();
        row.path = "/root/review_tests".into();
        assert_eq!(
            title_of(&facts(row, OutputFacts::default())),
            "review tests"
        );
        // A display name that is neither id nor taskName wins over the taskName.
        let mut row = live();
        row.name = "  Inspect the repo ".into();
        assert_eq!(
            title_of(&facts(row, OutputFacts::default())),
            "Inspect the repo"
        );
        // The session name only counts for a known session; a blank one does not.
        let out = OutputFacts {
            session_name: Some("Ignored".into()),
            ..OutputFacts::default()
        };
        assert_eq!(title_of(&facts(live(), out)), "inspect repo");
    }

    #[test]
    fn golden_state_texts() {
        // "renders one canonical state text for live and closed threads" (with the pid the
        // result texts add to a live one).
        let mut busy = live();
        busy.state = ThreadState::Live { phase: Phase::Busy };
        assert_eq!(
            status_of(&facts(busy, OutputFacts::default())),
            "live/busy pid=123"
        );
        assert_eq!(
            status_of(&facts(closed(), OutputFacts::default())),
            "closed/exited"
        );
        let mut stale = closed();
        stale.state.exit_mut().unwrap().kind = ExitKind::Stale;
        stale.state.exit_mut().unwrap().message = Some("restored".into());
        assert_eq!(
            status_of(&facts(stale, OutputFacts::default())),
            "closed/stale"
        );
        let mut failed = closed();
        failed.state.exit_mut().unwrap().kind = ExitKind::Failed;
        failed.state.exit_mut().unwrap().message = Some("boom".into());
        assert_eq!(
            status_of(&facts(failed, OutputFacts::default())),
            "closed/failed"
        );
        let mut code1 = closed();
        code1.state.exit_mut().unwrap().code = Some(1);
        assert_eq!(
            status_of(&facts(code1, OutputFacts::default())),
            "closed/failed"
        );
        let mut stopped = closed();
        stopped.state.exit_mut().unwrap().kind = ExitKind::Stopped;
        stopped.state.exit_mut().unwrap().code = None;
        stopped.state.exit_mut().unwrap().signal = Some("SIGKILL".into());
        assert_eq!(
            status_of(&facts(stopped, OutputFacts::default())),
            "closed/stopped"
        );
    }

    #[test]
    fn golden_poll_and_wait_texts() {
        // "shows running state and next actions in poll output"
        let mut busy = live();
        busy.state = ThreadState::Live { phase: Phase::Busy };
        let f = facts(busy, OutputFacts::default());
        let text = with(&f, Detail::Summary, |p| polled(p, &p.snapshot()));
        assert_eq!(
            text,
            "Pi thread \"inspect repo\"\nPath: /root/inspect_repo\nID: thread_012345abcdef\nParent: /root\nDepth: 1\nStatus: live/busy pid=123\nRunning: yes\nNext: wait, poll, send follow_up, or stop\nCwd: /tmp/project\nDetail: summary"
        );
        // "shows running state and next actions in wait output"
        let f = facts(live(), OutputFacts::default());
        let text = with(&f, Detail::Summary, |p| waited(p, &p.snapshot(), false, 12));
        assert_eq!(
            text,
            "Wait completed after 12ms for \"inspect repo\".\nPath: /root/inspect_repo\nStatus: live/idle pid=123\nRunning: yes\nNext: send prompt, poll, or stop\nDetail: summary"
        );
        // (Its progress text, `Waiting 12ms for "inspect repo".` …, is the Pi extension's:
        // serve sends the progress details only.)
        let f = facts(closed(), OutputFacts::default());
        let text = with(&f, Detail::Summary, |p| waited(p, &p.snapshot(), true, 12));
        assert_eq!(
            text,
            "Wait timed out after 12ms for \"inspect repo\".\nPath: /root/inspect_repo\nStatus: closed/exited\nRunning: no\nNext: archive, or list\nDetail: summary"
        );
        // "keeps default poll details summarized and makes full output explicit"
        let long = format!("FIRST\n{}\nLAST", "x".repeat(5_000));
        let f = facts(
            closed(),
            OutputFacts {
                last_assistant_text: Some(long),
                ..OutputFacts::default()
            },
        );
        let summary = with(&f, Detail::Summary, |p| polled(p, &p.snapshot()));
        assert!(summary.contains("Result summary"));
        assert!(summary.contains("truncated; use detail=tail or detail=full for more"));
        assert!(!summary.contains("LAST"));
        let tail = with(&f, Detail::Tail, |p| polled(p, &p.snapshot()));
        assert!(tail.contains("Assistant output tail (truncated):"));
        let full = with(&f, Detail::Full, |p| polled(p, &p.snapshot()));
        assert!(full.contains("Last assistant output (full retained):"));
        // "falls back to the last assistant output when a live partial is blank"
        let f = facts(
            live(),
            OutputFacts {
                last_assistant_text: Some("Previous answer".into()),
                last_partial_text: Some(" \n\t ".into()),
                ..OutputFacts::default()
            },
        );
        assert!(with(&f, Detail::Full, |p| polled(p, &p.snapshot())).contains("Previous answer"));
    }

    /// A poll with everything: parent id, session, result, events of each kind, stderr.
    #[test]
    fn poll_text_with_events_and_stderr() {
        let mut row = closed();
        row.parent_id = Some("thread_aaaaaaaaaaaa".into());
        row.session_file = Some("/tmp/s.jsonl".into());
        row.session_id = Some("s-1".into());
        let ev = |seq: i64, kind: &str, data: &str| EventRow {
            seq,
            at: format!("2026-01-01T00:00:0{seq}.000Z"),
            kind: kind.to_string().into(),
            data: data.into(),
        };
        let f = ThreadFacts {
            row,
            out: OutputFacts {
                last_assistant_text: Some("Done.\nAll good.".into()),
                stderr_tail: b"warn: x\n".to_vec(),
                ..OutputFacts::default()
            },
            events: vec![
                ev(1, "thread_started", r#"{"pid":9}"#),
                ev(2, "tool_completed", r#"{"toolName":"read","error":true}"#),
                ev(3, "assistant_message", r#"{"text":"Done.\nAll good."}"#),
                ev(
                    4,
                    "ui_request",
                    r#"{"method":"select","title":"Pick","autoCancelled":true}"#,
                ),
                ev(
                    5,
                    "thread_forked",
                    r#"{"pid":9,"sourceSessionFile":"/a.jsonl","sourceEntryId":null}"#,
                ),
                ev(
                    6,
                    "thread_closed",
                    r#"{"exit":{"kind":"exited","code":0,"signal":null}}"#,
                ),
            ],
            usage: Default::default(),
        };
        let text = with(&f, Detail::Tail, |p| polled(p, &p.snapshot()));
        assert_eq!(
            text,
            "Pi thread \"inspect repo\"\nPath: /root/inspect_repo\nID: thread_012345abcdef\nParent: /root (thread_aaaaaaaaaaaa)\nDepth: 1\nStatus: closed/exited\nRunning: no\nNext: resume, fork, archive, or list\nCwd: /tmp/project\nDetail: tail\nSession: /tmp/s.jsonl\n\nAssistant output tail:\nDone.\nAll good.\n\nRecent events:\n- 2026-01-01T00:00:01.000Z #1 thread started pid=9\n- 2026-01-01T00:00:02.000Z #2 tool completed: read (error)\n- 2026-01-01T00:00:03.000Z #3 assistant: Done. All good.\n- 2026-01-01T00:00:04.000Z #4 ui select: Pick (auto-cancelled)\n- 2026-01-01T00:00:05.000Z #5 thread forked pid=9 source=/a.jsonl\n- 2026-01-01T00:00:06.000Z #6 thread closed: exited (code 0)\n\nstderr tail:\nwarn: x\n"
        );
    }

    /// A thread that spent something says so in its poll, wait and list texts (one compact
    /// line); one that spent nothing shows no spend; the snapshot (details) never has it.
    #[test]
    fn poll_wait_and_list_texts_show_what_the_thread_spent() {
        let mut f = facts(closed(), OutputFacts::default());
        let plain = with(&f, Detail::Summary, |p| {
            let s = p.snapshot();
            let mut line = String::new();
            list_line(&mut line, true, &s).unwrap();
            (
                polled(p, &s),
                waited(p, &s, false, 5),
                line,
                serde_json::to_string(&s).unwrap(),
            )
        });
        assert!(!plain.0.contains("Spent") && !plain.1.contains("Spent"));
        assert!(!plain.2.contains("tokens"), "{}", plain.2);
        f.usage = Usage {
            input_tokens: 12_000,
            output_tokens: 300,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            cost_usd: 0.01234,
            turns: 2,
            tool_calls: 1,
        };
        let spent = with(&f, Detail::Summary, |p| {
            let s = p.snapshot();
            let mut line = String::new();
            list_line(&mut line, true, &s).unwrap();
            (
                polled(p, &s),
                waited(p, &s, false, 5),
                line,
                serde_json::to_string(&s).unwrap(),
            )
        });
        // Exactly one line more, after the status.
        assert_eq!(
            spent.0,
            plain.0.replace(
                "Status: closed/exited\n",
                "Status: closed/exited\nSpent: 12.3k tokens, $0.0123\n"
            )
        );
        assert_eq!(
            spent.1,
            plain.1.replace(
                "Status: closed/exited\n",
                "Status: closed/exited\nSpent: 12.3k tokens, $0.0123\n"
            )
        );
        assert_eq!(
            spent.2,
            "inspect repo /root/inspect_repo - closed/exited, 12.3k tokens, $0.0123 [id: thread_012345abcdef]"
        );
        assert_eq!(spent.3, plain.3, "the snapshot is the contract's");
        // Tokens without a cost, and nothing at all.
        let tokens_only = Usage {
            input_tokens: 950,
            ..Usage::default()
        };
        assert_eq!(spend(&tokens_only).as_deref(), Some("950 tokens"));
        assert_eq!(spend(&Usage::default()), None);
    }

    #[test]
    fn action_texts() {
        let f = facts(live(), OutputFacts::default());
        with(&f, Detail::Summary, |p| {
            let s = p.snapshot();
            assert_eq!(
                started(&s, Some(true), None),
                "Started Pi thread \"inspect repo\".\nPath: /root/inspect_repo\nID: thread_012345abcdef\nStatus: live/idle pid=123\nPrompt accepted: yes\nPoll with: { \"action\": \"poll\", \"id\": \"/root/inspect_repo\" }"
            );
            assert_eq!(
                started(&s, None, Some("No answer yet")),
                "Started Pi thread \"inspect repo\".\nPath: /root/inspect_repo\nID: thread_012345abcdef\nStatus: live/idle pid=123\nPrompt accepted: no\nNote: No answer yet\nPoll with: { \"action\": \"poll\", \"id\": \"/root/inspect_repo\" }"
            );
            assert_eq!(
                sent(&s, SendMode::FollowUp, None, Some("Timed out")),
                "Sent message to \"inspect repo\" with mode follow_up.\nPath: /root/inspect_repo\nAccepted: unknown\nStatus: live/idle pid=123\nError: Timed out"
            );
            assert_eq!(
                sent(&s, SendMode::Prompt, Some(true), None),
                "Sent message to \"inspect repo\" with mode prompt.\nPath: /root/inspect_repo\nAccepted: yes\nStatus: live/idle pid=123"
            );
            assert_eq!(
                resumed(&s, false),
                "Resumed Pi thread \"inspect repo\".\nPath: /root/inspect_repo\nID: thread_012345abcdef\nStatus: live/idle pid=123\nNext: send prompt, poll, or stop"
            );
            assert!(resumed(&s, true).starts_with("Thread already live \"inspect repo\"."));
            assert_eq!(
                forked(&s, "/a.jsonl", None),
                "Forked Pi thread \"inspect repo\".\nPath: /root/inspect_repo\nID: thread_012345abcdef\nSource session: /a.jsonl\nSource entry: leaf/root\nStatus: live/idle pid=123\nNext: send prompt, poll, or stop"
            );
        });
        let f = facts(closed(), OutputFacts::default());
        with(&f, Detail::Summary, |p| {
            let s = p.snapshot();
            assert_eq!(
                stopped(&s, false),
                "Stopped \"inspect repo\".\nPath: /root/inspect_repo\nStatus: closed/exited"
            );
            assert_eq!(
                stopped(&s, true),
                "Already closed \"inspect repo\".\nPath: /root/inspect_repo\nStatus: closed/exited"
            );
            assert_eq!(
                archived(&s, true),
                "Archived \"inspect repo\".\nPath: /root/inspect_repo\nStatus: closed/exited\nNext: archive, or list"
            );
            let mut line = String::new();
            list_line(&mut line, true, &s).unwrap();
            list_line(&mut line, false, &s).unwrap();
            assert_eq!(
                line,
                "inspect repo /root/inspect_repo - closed/exited [id: thread_012345abcdef]\ninspect repo /root/inspect_repo - closed/exited [id: thread_012345abcdef]"
            );
        });
        let mut row = closed();
        row.archived = true;
        let f = facts(row, OutputFacts::default());
        with(&f, Detail::Summary, |p| {
            let mut line = String::new();
            list_line(&mut line, true, &p.snapshot()).unwrap();
            assert_eq!(
                line,
                "inspect repo /root/inspect_repo - closed/exited archived [id: thread_012345abcdef]"
            );
        });
        assert_eq!(next_line(&[]), "Next: none");
        assert_eq!(next_line(&["list"]), "Next: list");
        assert_eq!(
            trim_for_display(&"a".repeat(250), 240),
            format!("{}\n[truncated 10 chars]", "a".repeat(240))
        );
    }
}
