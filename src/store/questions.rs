//! A child's questions to its parent (`THREADBASE_UI=parent`, issue 30): each dialog a child
//! opens (`confirm`, `select`, `input`, `editor`) is a `ui_requests` row while the child waits.
//! The answer is written once, on the condition that the row is still pending
//! (`sql/question_answer.sql`), by whichever process answers (the `thread_answer` tool,
//! `threadbase answer`, `top`); the serve holding the child reads it and answers the child. A
//! timeout, a stop, an exit or a restore after a crash ends the row the same way, so a
//! question is never answered twice nor left pending behind a closed thread.

use crate::store::{Conn, ThreadIds};
use rusqlite::{named_params, OptionalExtension, Row};
use serde::Serialize;
use serde_json::Value;

use crate::domain::{QuestionKind, QuestionState, ThreadId};
use crate::error::Result;

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
    fn from_row(r: &Row<'_>) -> rusqlite::Result<Question> {
        let options: Option<String> = r.get("options")?;
        let answer: Option<String> = r.get("answer")?;
        Ok(Question {
            id: r.get("id")?,
            thread_id: r.get("thread_id")?,
            request_id: r.get("request_id")?,
            kind: r.get("kind")?,
            title: r.get("title")?,
            message: r.get("message")?,
            options: options.and_then(|o| serde_json::from_str(&o).ok()),
            asked_at: r.get("asked_at")?,
            deadline_ms: r.get("deadline_ms")?,
            state: r.get("state")?,
            answer: answer.and_then(|a| serde_json::from_str(&a).ok()),
            answered_by: r.get("answered_by")?,
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
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/question_insert.sql"))?
        .query_row(
            named_params! {
                ":thread": q.thread_id, ":launch": q.launch_seq, ":request": q.request_id,
                ":kind": q.kind, ":title": q.title, ":message": q.message, ":options": options,
                ":at": q.at, ":deadline": q.deadline_ms,
            },
            |r| r.get(0),
        )?)
}

/// A thread's oldest pending question.
pub fn pending_of(conn: &Conn, thread_id: &ThreadId) -> Result<Option<Question>> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/question_pending.sql"))?
        .query_row([thread_id], Question::from_row)
        .optional()?)
}

/// The oldest pending question of each of the threads `ids`, by
/// position in it (a list's batch, one query): each as [`pending_of`] gives it.
pub fn pending_of_threads(conn: &Conn, ids: &ThreadIds) -> Result<Vec<Option<Question>>> {
    let mut out = vec![None; ids.len()];
    conn.by_position(
        include_str!("../../sql/questions_pending_of_threads.sql"),
        ids,
        &mut out,
        |r| Question::from_row(r).map(Some),
    )?;
    Ok(out)
}

/// One question by id.
pub fn by_id(conn: &Conn, id: i64) -> Result<Option<Question>> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/question_by_id.sql"))?
        .query_row([id], Question::from_row)
        .optional()?)
}

/// Writes `answer` (JSON) if the question is still pending; false if it was not.
pub fn answer(conn: &Conn, id: i64, answer: &Value, by: &str, at: &str) -> Result<bool> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/question_answer.sql"))?
        .execute(named_params! {
            ":answer": answer.to_string(), ":at": at, ":by": by, ":id": id,
        })?
        > 0)
}

/// Ends a pending question without an answer (`TimedOut` or `Cancelled`); false if it was not
/// pending.
pub fn end(conn: &Conn, id: i64, state: QuestionState, by: &str, at: &str) -> Result<bool> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/question_end.sql"))?
        .execute(named_params! {":state": state, ":at": at, ":by": by, ":id": id})?
        > 0)
}

/// Cancels a thread's pending questions (its process ended); returns how many.
pub fn cancel_thread(conn: &Conn, thread_id: &ThreadId, by: &str, at: &str) -> Result<usize> {
    Ok(conn
        .db()
        .prepare_cached(include_str!("../../sql/question_cancel_thread.sql"))?
        .execute(named_params! {":thread": thread_id, ":at": at, ":by": by})?)
}

/// For a contract B thread, the notice of question `q` for its parent agent (a `mailbox` row
/// the parent's serve delivers, as `agent_update`'s progress); nothing for another contract.
pub fn notify_parent_agent(conn: &Conn, q: &NewQuestion<'_>, question_id: i64) -> Result<()> {
    let place: Option<(String, String)> = conn
        .db()
        .prepare_cached(include_str!("../../sql/question_parent_agent.sql"))?
        .query_row([q.thread_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
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
