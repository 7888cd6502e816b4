//! Answering a child's question (issue 30, `THREADBASE_UI=parent`): the `thread_answer` tool,
//! `threadbase answer REF VALUE` and `top`. The answer is validated against the question's kind
//! and options, then written once on the condition that the row is still pending; the serve
//! holding the child reads it and answers the child (runtime `questions`).

use serde_json::Value;

use super::Engine;
use crate::contract::answer::{self, Answered};
use crate::contract::ToolResult;
use crate::engine::Reply;
use crate::error::{Error, ErrorCode, Result};
use crate::store::questions::{self, Question};
use crate::store::threads::ThreadRow;
use crate::store::Store;
use crate::time::now_iso;

/// Answers `row`'s oldest pending question with `given` (validated); `by` is recorded as who
/// answered. Returns the question and the answer the child gets.
pub fn answer_thread(
    store: &Store,
    row: &ThreadRow,
    given: &Value,
    by: &str,
) -> Result<(Question, Value)> {
    let q = questions::pending_of(&store.read()?, &row.id)?.ok_or_else(|| no_question(row))?;
    let value = answer::validate(&q, given)?;
    let written = store.write(|tx| questions::answer(tx, q.id, &value, by, &now_iso()))?;
    if !written {
        let now = questions::by_id(&store.read()?, q.id)?;
        let how = now
            .as_ref()
            .map(|q| format!("{} by {}", q.state, q.answered_by.as_deref().unwrap_or("?")))
            .unwrap_or_else(|| "gone".into());
        return Err(Error::conflict(format!(
            "The question of {} was ended meanwhile ({how}); it is answered at most once. Repair: poll the thread to see whether it asks again.",
            row.path
        )));
    }
    Ok((q, value))
}

fn no_question(row: &ThreadRow) -> Error {
    Error::new(
        ErrorCode::Conflict,
        format!(
            "{} has no question waiting for an answer (its status is {}). Repair: poll it; answer only a question poll or wait shows (THREADBASE_UI=parent).",
            row.path, row.status()
        ),
    )
}

/// The `thread_answer` tool: `{id, answer}`, `id` a thread reference of this session.
pub(super) fn thread_answer(e: &Engine, req: answer::AnswerRequest) -> Result<Reply> {
    // A thread of this session's `thread` tool (its whole subtree), else one of its other
    // contracts' threads (a subagent's path, a worker's id).
    let row = match super::thread::find_thread(e, &req.id) {
        Ok(row) => row,
        Err(err) if err.code == ErrorCode::UnknownReference => {
            crate::store::refs::resolve_anywhere(
                &e.store.read()?,
                &req.id,
                Some(e.cfg.session_id.as_str()),
                None,
            )
            .map_err(|_| err)?
        }
        Err(err) => return Err(err),
    };
    let (q, value) = answer_thread(&e.store, &row, &req.answer, "thread_answer")?;
    let text = answer::answered_text(&row.path, &q, &value);
    Ok(Reply::shaped(move |w| {
        crate::engine::reply::json(
            w,
            &ToolResult::new(
                text,
                Answered {
                    kind: "answered",
                    thread_id: row.id.as_str(),
                    path: &row.path,
                    question: &q,
                    answer: &value,
                },
            ),
        )
    }))
}
