//! `thread_answer {id, answer}` (issue 30, `THREADBASE_UI=parent`): the parent's answer to a
//! child's pending question. Not an action of contract A's `thread` tool (its contract lists
//! them): a second tool, registered only with the setting. The answer is validated against the
//! question's kind and options; `threadbase answer REF VALUE` and `top` go through the same
//! [`validate`], with the value as typed (`yes`/`no` for a confirm).

use serde::Serialize;
use serde_json::Value;

use crate::domain::QuestionKind;
use crate::error::{Error, Result};
use crate::store::questions::Question;

/// The method name on serve's pipe and the extension's tool name.
pub const METHOD: &str = "thread_answer";

/// A parsed `thread_answer` request.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerRequest {
    /// A thread reference, as the `thread` tool takes one (id, path, task name).
    pub id: String,
    pub answer: Value,
}

/// Parses `{id, answer}`; extra fields are rejected.
pub fn parse(params: &Value) -> Result<AnswerRequest> {
    let obj = params.as_object().ok_or_else(|| {
        Error::invalid("thread_answer takes an object {id, answer}. Repair: send {\"id\": \"<thread id or path>\", \"answer\": true}.")
    })?;
    if let Some(extra) = obj.keys().find(|k| *k != "id" && *k != "answer") {
        return Err(Error::invalid(format!(
            "thread_answer does not take {extra:?}. Repair: send only id and answer."
        )));
    }
    let id = match obj.get("id") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        _ => {
            return Err(Error::invalid(
                "thread_answer needs id, the thread whose question it answers. Repair: pass the thread's id or path, as poll shows it.",
            ))
        }
    };
    let answer = match obj.get("answer") {
        Some(v @ (Value::String(_) | Value::Bool(_))) => v.clone(),
        _ => {
            return Err(Error::invalid(
                "thread_answer needs answer: true or false for a confirm, one of the options for a select, a string for input or editor. Repair: pass answer.",
            ))
        }
    };
    Ok(AnswerRequest { id, answer })
}

/// The answer the child is sent for `given` (a tool's JSON value, or the CLI's text as a
/// string): a boolean for a confirm (`true`/`false`, or the words yes/no, y/n), an option
/// (exactly) for a select, a string for input and editor.
pub fn validate(q: &Question, given: &Value) -> Result<Value> {
    let path_hint = "Repair: poll the thread to see its question and answer it as it says.";
    match q.kind {
        QuestionKind::Confirm => match given {
            Value::Bool(b) => Ok(Value::Bool(*b)),
            Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "y" => Ok(Value::Bool(true)),
                "false" | "no" | "n" => Ok(Value::Bool(false)),
                _ => Err(Error::invalid(format!(
                    "The question is a confirm: the answer is true or false, not {}. {path_hint}",
                    crate::paths::json_quote(s)
                ))),
            },
            _ => Err(Error::invalid(format!(
                "The question is a confirm: the answer is true or false. {path_hint}"
            ))),
        },
        QuestionKind::Select => {
            let options = q.options.as_deref().unwrap_or_default();
            match given {
                Value::String(s) if options.iter().any(|o| o == s) => Ok(given.clone()),
                _ => Err(Error::invalid(format!(
                    "The question is a select: the answer is one of {}, exactly. {path_hint}",
                    serde_json::to_string(options).unwrap_or_default()
                ))),
            }
        }
        QuestionKind::Input | QuestionKind::Editor => match given {
            Value::String(_) => Ok(given.clone()),
            _ => Err(Error::invalid(format!(
                "The question is an {}: the answer is a string. {path_hint}",
                q.kind
            ))),
        },
    }
}

/// `thread_answer`'s `details`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Answered<'a> {
    pub kind: &'static str,
    pub thread_id: &'a str,
    pub path: &'a str,
    pub question: &'a Question,
    pub answer: &'a Value,
}

/// `thread_answer`'s content text.
pub fn answered_text(path: &str, q: &Question, answer: &Value) -> String {
    let what = q.title.as_deref().unwrap_or("its question");
    format!(
        "Answered the {} of {path} ({what}) with {answer}. The child goes on with it. Next: wait, poll",
        q.kind
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::QuestionState;
    use serde_json::json;

    fn question(kind: QuestionKind, options: Option<Vec<String>>) -> Question {
        Question {
            id: 1,
            thread_id: "thread_000000000001".into(),
            request_id: "r".into(),
            kind,
            title: Some("Sure?".into()),
            message: None,
            options,
            asked_at: "2026-12-04T00:00:00.000Z".into(),
            deadline_ms: 0,
            state: QuestionState::Pending,
            answer: None,
            answered_by: None,
        }
    }

    #[test]
    fn answers_are_checked_against_the_kind_and_options() {
        let c = question(QuestionKind::Confirm, None);
        assert_eq!(validate(&c, &json!(true)).unwrap(), json!(true));
        assert_eq!(validate(&c, &json!("No")).unwrap(), json!(false));
        assert!(validate(&c, &json!("maybe")).is_err());
        let s = question(QuestionKind::Select, Some(vec!["A".into(), "B".into()]));
        assert_eq!(validate(&s, &json!("B")).unwrap(), json!("B"));
        let err = validate(&s, &json!("C")).unwrap_err();
        assert!(err.message.contains("Repair:"), "{}", err.message);
        assert!(validate(&s, &json!(true)).is_err());
        let i = question(QuestionKind::Input, None);
        assert_eq!(validate(&i, &json!("x")).unwrap(), json!("x"));
        assert!(validate(&i, &json!(false)).is_err());
    }

    #[test]
    fn requests_are_strict() {
        assert!(parse(&json!({"id": "a", "answer": true})).is_ok());
        assert!(parse(&json!({"id": "a", "answer": true, "x": 1})).is_err());
        assert!(parse(&json!({"id": "", "answer": true})).is_err());
        assert!(parse(&json!({"id": "a"})).is_err());
        assert!(parse(&json!({"id": "a", "answer": 3})).is_err());
        assert!(parse(&json!([1])).is_err());
    }
}
