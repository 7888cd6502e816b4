//! Contract A's notices: a `thread` tool session is told, as a `mailbox` row for its caller
//! (direction `to_parent`, kind `notice`, no agent recipient), when one of its threads
//! finishes a turn, exits, fails, is stopped by anyone but the session's own `stop`, or is
//! closed as stale by a restore. The row is written in the transaction that records the change,
//! so a crash between the two loses nothing; the session's serve emits it once (the row
//! watcher, [`super::mailbox::pending_notices`]). A `wait` that reports the thread's settled
//! or closed state marks the thread's pending notices delivered ([`quiet`]): the result gave
//! the news already.

use crate::store::db::{params, q, Row};
use crate::store::Conn;

use super::mailbox::{self, Direction, MailKind, NewMail};
use crate::domain::{state_words, Attention, ExitKind, Phase, ThreadId, ThreadStatus};
use crate::error::Result;
use crate::store::rows::columns;
use crate::text::thread_notice_text;

/// What a notice is for: the send key's first word (one notice per thread, launch and event
/// count for each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// A turn ended and the live thread is idle.
    Settled,
    /// The thread's process ended (exited, failed, stopped by another, or closed as stale).
    Closed,
}

/// Writes the notice for `thread_id` in the caller's transaction, when the thread is contract
/// A's and its row says what `cause` expects (a settle: live and idle; a close: closed).
/// Returns whether a row was written.
pub fn write(conn: &Conn, thread_id: &ThreadId, cause: Cause, at: &str) -> Result<bool> {
    let Some(f) = facts_of(conn, thread_id)? else {
        return Ok(false);
    };
    let expected = match cause {
        Cause::Settled => f.status == ThreadStatus::Live && f.phase == Phase::Idle,
        Cause::Closed => f.status == ThreadStatus::Closed,
    };
    if !expected {
        return Ok(false);
    }
    // Issue 45: a turn that ended in an error is told as a failure, with the error's first
    // line, as every surface reads it (the view `thread_attention`).
    let need = crate::store::attention::of_thread(conn, thread_id)?;
    let state = state_words(
        f.status,
        f.phase,
        f.exit_kind,
        f.exit_code,
        f.exit_signal.is_some(),
        need.as_ref().map(|n| n.attention),
    );
    let turn_error = need
        .as_ref()
        .filter(|n| f.status == ThreadStatus::Live && n.attention == Attention::Failed)
        .and_then(|n| n.detail.as_deref());
    let body = thread_notice_text(
        &f.name,
        &f.path,
        &state,
        f.exit_kind,
        turn_error.or(f.exit_message.as_deref()),
        f.answer.as_deref(),
    );
    let word = match cause {
        Cause::Settled => "settled",
        Cause::Closed => "closed",
    };
    let key = format!("notice:{word}:{}:{}", f.launch_seq, f.last_seq);
    insert(conn, thread_id, &key, &body, at)
}

/// Issue 45: the notice that a contract A thread asks its parent question `q` (id
/// `question_id`), with what it asks and the exact call that answers it, written in the
/// transaction that records the question. Returns whether a row was written (none for another
/// contract's thread).
pub fn asked(
    conn: &Conn,
    q: &crate::store::questions::NewQuestion<'_>,
    question_id: i64,
) -> Result<bool> {
    let Some(f) = facts_of(conn, q.thread_id)? else {
        return Ok(false);
    };
    let mut body = format!(
        "Thread \"{}\" ({}) needs you: {}",
        f.name,
        f.path,
        crate::text::question_notice_text(&f.path, q.kind.as_str(), q.title, q.options)
    );
    if let Some(m) = q.message.filter(|m| !m.trim().is_empty()) {
        body.push('\n');
        body.push_str(m.trim());
    }
    insert(
        conn,
        q.thread_id,
        &format!("notice:asking:{question_id}"),
        &body,
        q.at,
    )
}

/// Issue 45: the notice that a contract A thread stalled (busy, nothing from the child since
/// `since`), once per stall (keyed by `since`), with its last event and how to stop it.
/// Returns whether a row was written.
pub fn stalled(
    conn: &Conn,
    thread_id: &ThreadId,
    since: &str,
    last_event: Option<&str>,
    at: &str,
) -> Result<bool> {
    let Some(f) = facts_of(conn, thread_id)? else {
        return Ok(false);
    };
    let mut body = format!(
        "Thread \"{}\" ({}) stalled: live/stalled. It is busy, but nothing came from the child since {since}",
        f.name, f.path
    );
    if let Some(e) = last_event {
        body.push_str(&format!(" (its last event: {e})"));
    }
    body.push_str(&format!(
        ". Repair: poll {} to look, or stop it (the thread tool's stop, or `threadbase stop {}`).",
        f.path, f.path
    ));
    insert(
        conn,
        thread_id,
        &format!("notice:stalled:{since}"),
        &body,
        at,
    )
}

/// Issue 49: the notice that a contract A thread passed the warning share of a cap and was
/// asked to wrap up (`what`: how much of which cap, and how to raise it), once per launch.
/// Returns whether a row was written.
pub fn budget_warned(conn: &Conn, thread_id: &ThreadId, what: &str, at: &str) -> Result<bool> {
    let Some(f) = facts_of(conn, thread_id)? else {
        return Ok(false);
    };
    let body = format!("Thread \"{}\" ({}) {what}", f.name, f.path);
    let key = format!("notice:budget_warned:{}", f.launch_seq);
    insert(conn, thread_id, &key, &body, at)
}

/// The facts a contract A notice of `thread_id` is written from; `None` for a thread of
/// another contract (or gone).
fn facts_of(conn: &Conn, thread_id: &ThreadId) -> Result<Option<Facts>> {
    conn.opt(
        q!("thread_notice_facts", facts_col),
        params![thread_id],
        Facts::from_row,
    )
}

/// Writes the notice `body` about `thread_id` for its session, once per `key`; whether a row
/// was written.
fn insert(conn: &Conn, thread_id: &ThreadId, key: &str, body: &str, at: &str) -> Result<bool> {
    let written = mailbox::insert(
        conn,
        &NewMail {
            thread_id,
            direction: Direction::ToParent,
            kind: MailKind::Notice,
            send_key: key,
            message_id: None,
            body,
            recipient: None,
            at,
            delivered: false,
        },
    )?;
    Ok(written.is_some())
}

/// A result of the session's own `wait` reported the thread's settled or closed state: its
/// pending notices are marked delivered (returns how many).
pub fn quiet(conn: &Conn, thread_id: &ThreadId, at: &str) -> Result<usize> {
    conn.execute(q!("notices_quiet"), params![thread_id, at])
}

/// A thread's phase as its row holds it (the ingest writer reads it before a batch's phase
/// changes, to tell a settle from other idle changes); `None` when the row is gone.
pub fn phase_before(conn: &Conn, thread_id: &ThreadId) -> Result<Option<Phase>> {
    conn.opt(q!("thread_phase"), params![thread_id], |r| r.get(0))
}

columns! {
    /// What a contract A notice is written from (`{notice_facts_row}` in
    /// `sql/thread_notice_facts.sql`, which reads `threads t LEFT JOIN thread_output o`): what
    /// [`Facts`] holds.
    pub mod facts_col as "{notice_facts_row}" {
        NAME = "t.name",
        PATH = "t.path",
        STATUS = "t.status",
        PHASE = "t.phase",
        EXIT_KIND = "t.exit_kind",
        EXIT_CODE = "t.exit_code",
        EXIT_SIGNAL = "t.exit_signal",
        EXIT_MESSAGE = "t.exit_message",
        LAUNCH_SEQ = "t.launch_seq",
        LAST_SEQ = "t.last_seq",
        ANSWER = "o.last_assistant_text",
    }
}

struct Facts {
    name: String,
    path: String,
    status: ThreadStatus,
    phase: Phase,
    exit_kind: Option<ExitKind>,
    exit_code: Option<i64>,
    exit_signal: Option<String>,
    exit_message: Option<String>,
    launch_seq: i64,
    last_seq: i64,
    answer: Option<String>,
}

impl Facts {
    /// The row of `sql/thread_notice_facts.sql` ([`facts_col`]).
    fn from_row(r: &Row<'_>) -> Result<Facts> {
        Ok(Facts {
            name: r.get(facts_col::NAME)?,
            path: r.get(facts_col::PATH)?,
            status: r.get(facts_col::STATUS)?,
            phase: r.get(facts_col::PHASE)?,
            exit_kind: r.get(facts_col::EXIT_KIND)?,
            exit_code: r.get(facts_col::EXIT_CODE)?,
            exit_signal: r.get(facts_col::EXIT_SIGNAL)?,
            exit_message: r.get(facts_col::EXIT_MESSAGE)?,
            launch_seq: r.get(facts_col::LAUNCH_SEQ)?,
            last_seq: r.get(facts_col::LAST_SEQ)?,
            answer: r.get(facts_col::ANSWER)?,
        })
    }
}
