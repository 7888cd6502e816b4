//! A child's questions to its parent (`THREADBASE_UI=parent`, issue 30): each dialog a child
//! opens (`confirm`, `select`, `input`, `editor`) is a `ui_requests` row while the child waits.
//! The answer is written once, on the condition that the row is still pending
//! (`sql/question_answer.sql`), by whichever process answers (the `thread_answer` tool,
//! `threadbase answer`, `top`); the serve holding the child reads it and answers the child. A
//! timeout, a stop, an exit or a restore after a crash ends the row the same way, so a
//! question is never answered twice nor left pending behind a closed thread.

use crate::store::db::{named, params, q, Row};
use crate::store::{Conn, ThreadIds};
use serde::Serialize;
use serde_json::Value;

use crate::domain::{QuestionKind, QuestionState, ThreadId};
use crate::error::Result;
use crate::store::batch_col;
use crate::store::rows::columns;

columns! {
    /// A `ui_requests` row's columns, in order (`{question_row}` in
    /// `sql/question_pending.sql`, `sql/question_by_id.sql` and, after the batch's
    /// `{batch_row}`, `sql/questions_pending_of_threads.sql`, which read `ui_requests r`): what
    /// [`Question`] holds, read by these positions.
    pub mod col as "{question_row}" {
        ID = "r.id",
        THREAD_ID = "r.thread_id",
        REQUEST_ID = "r.request_id",
        KIND = "r.kind",
        TITLE = "r.title",
        MESSAGE = "r.message",
        OPTIONS = "r.options",
        ASKED_AT = "r.asked_at",
        DEADLINE_MS = "r.deadline_ms",
        STATE = "r.state",
        ANSWER = "r.answer",
        ANSWERED_AT = "r.answered_at",
        ANSWERED_BY = "r.answered_by",
    }
}

/// One `ui_requests` row.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    pub id: i64,
    pub thread_id: String,
    #[serde(skip)]
    pub request_id: String,
    pub kind: QuestionKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    pub asked_at: String,
    #[serde(skip)]
    pub deadline_ms: i64,
    #[serde(skip)]
    pub state: QuestionState,
    #[serde(skip)]
    pub answer: Option<Value>,
    #[serde(skip)]
    pub answered_by: Option<String>,
}

impl Question {
    /// The [`col`] row that starts at position `first` of `r`.
    pub(in crate::store) fn from_row(r: &Row<'_>, first: usize) -> Result<Question> {
        let options: Option<String> = r.get(first + col::OPTIONS)?;
        let answer: Option<String> = r.get(first + col::ANSWER)?;
        Ok(Question {
            id: r.get(first + col::ID)?,
            thread_id: r.get(first + col::THREAD_ID)?,
            request_id: r.get(first + col::REQUEST_ID)?,
            kind: r.get(first + col::KIND)?,
            title: r.get(first + col::TITLE)?,
            message: r.get(first + col::MESSAGE)?,
            options: options.and_then(|o| serde_json::from_str(&o).ok()),
            asked_at: r.get(first + col::ASKED_AT)?,
            deadline_ms: r.get(first + col::DEADLINE_MS)?,
            state: r.get(first + col::STATE)?,
            answer: answer.and_then(|a| serde_json::from_str(&a).ok()),
            answered_by: r.get(first + col::ANSWERED_BY)?,
        })
    }
}

/// A question as the runtime records it.
pub struct NewQuestion<'a> {
    pub thread_id: &'a ThreadId,
    pub launch_seq: i64,
    pub request_id: &'a str,
    pub kind: QuestionKind,
    pub title: Option<&'a str>,
    pub message: Option<&'a str>,
    pub options: Option<&'a [String]>,
    pub at: &'a str,
    pub deadline_ms: i64,
}

/// Records a pending question; returns its id.
pub fn insert(conn: &Conn, q: &NewQuestion<'_>) -> Result<i64> {
    let options = q.options.map(serde_json::to_string).transpose()?;
    conn.one(
        q!("question_insert"),
        named! {
            ":thread": q.thread_id, ":launch": q.launch_seq, ":request": q.request_id,
            ":kind": q.kind, ":title": q.title, ":message": q.message, ":options": options,
            ":at": q.at, ":deadline": q.deadline_ms,
        },
        |r| r.get(0),
    )
}

/// A thread's oldest pending question.
pub fn pending_of(conn: &Conn, thread_id: &ThreadId) -> Result<Option<Question>> {
    conn.opt(q!("question_pending", col), params![thread_id], |r| {
        Question::from_row(r, 0)
    })
}

/// The oldest pending question of each of the threads `ids`, by
/// position in it (a list's batch, one query): each as [`pending_of`] gives it.
pub fn pending_of_threads(conn: &Conn, ids: &ThreadIds) -> Result<Vec<Option<Question>>> {
    let mut out = vec![None; ids.len()];
    conn.by_position(
        q!("questions_pending_of_threads", batch_col, col),
        ids,
        &mut out,
        |r| Question::from_row(r, batch_col::COUNT).map(Some),
    )?;
    Ok(out)
}

/// One question by id.
pub fn by_id(conn: &Conn, id: i64) -> Result<Option<Question>> {
    conn.opt(q!("question_by_id", col), params![id], |r| {
        Question::from_row(r, 0)
    })
}

/// Writes `answer` (JSON) if the question is still pending; false if it was not.
pub fn answer(conn: &Conn, id: i64, answer: &Value, by: &str, at: &str) -> Result<bool> {
    Ok(conn.execute(
        q!("question_answer"),
        named! {
            ":answer": answer.to_string(), ":at": at, ":by": by, ":id": id,
        },
    )? > 0)
}

/// Ends a pending question without an answer (`TimedOut` or `Cancelled`); false if it was not
/// pending.
pub fn end(conn: &Conn, id: i64, state: QuestionState, by: &str, at: &str) -> Result<bool> {
    Ok(conn.execute(
        q!("question_end"),
        named! {":state": state, ":at": at, ":by": by, ":id": id},
    )? > 0)
}

/// Cancels a thread's pending questions (its process ended); returns how many.
pub fn cancel_thread(conn: &Conn, thread_id: &ThreadId, by: &str, at: &str) -> Result<usize> {
    conn.execute(
        q!("question_cancel_thread"),
        named! {":thread": thread_id, ":at": at, ":by": by},
    )
}

columns! {
    /// A contract B thread's path and its parent agent's (`{question_parent_row}` in
    /// `sql/question_parent_agent.sql`, which reads `threads`), read by [`notify_parent_agent`].
    pub mod parent_col as "{question_parent_row}" {
        PATH = "path",
        PARENT = "coalesce(parent_path, '/root')",
    }
}

/// For a contract B thread, the notice of question `q` for its parent agent (a `mailbox` row
/// the parent's serve delivers, as `agent_update`'s progress); nothing for another contract.
pub fn notify_parent_agent(conn: &Conn, q: &NewQuestion<'_>, question_id: i64) -> Result<()> {
    let place: Option<(String, String)> = conn.opt(
        q!("question_parent_agent", parent_col),
        params![q.thread_id],
        |r| Ok((r.get(parent_col::PATH)?, r.get(parent_col::PARENT)?)),
    )?;
    let Some((path, parent)) = place else {
        return Ok(());
    };
    let text = crate::text::question_notice_text(&path, q.kind.as_str(), q.title, q.options);
    super::mailbox::insert(
        conn,
        &super::mailbox::NewMail {
            thread_id: q.thread_id,
            direction: super::mailbox::Direction::ToParent,
            kind: super::mailbox::MailKind::Progress,
            send_key: &format!("question:{question_id}"),
            message_id: None,
            body: &text,
            recipient: Some(&parent),
            at: q.at,
            delivered: false,
        },
    )?;
    Ok(())
}
