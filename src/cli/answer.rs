//! `threadbase answer REF VALUE`: answers a child's pending question (issue 30,
//! `THREADBASE_UI=parent`) from a shell. REF is a thread id or canonical path (any session's);
//! VALUE is `yes`/`no` (or `true`/`false`) for a confirm, one of the options for a select,
//! the text for input and editor. The answer is written once, on the condition that the
//! question is still pending; the serve holding the child reads it and answers the child.

use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};

use crate::engine::answer::answer_thread;
use crate::error::Result;
use crate::store::refs::resolve_anywhere;
use crate::store::Store;

pub fn run(
    db: &Path,
    reference: &str,
    value: &str,
    as_json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let store = Store::open_existing(db)?;
    let row = resolve_anywhere(&store.read()?, reference, None, None)?;
    let (q, answer) = answer_thread(&store, &row, &Value::String(value.to_string()), "cli")?;
    if as_json {
        writeln!(
            out,
            "{}",
            json!({"answered": {"threadId": row.id, "path": row.path, "question": q, "answer": answer}})
        )?;
    } else {
        writeln!(
            out,
            "{}",
            crate::contract::answer::answered_text(&row.path, &q, &answer)
        )?;
    }
    Ok(())
}
