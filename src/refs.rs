//! Reference resolution for contract A, in its order, each step one indexed query:
//! thread id (exact, never falls through) → path (canonical, `root/…`, relative) → unique
//! task name or basename across the manager → ambiguous or unknown, with the contract's texts.

use rusqlite::Connection;

use crate::error::{Error, ErrorCode, Result};
use crate::paths::{is_thread_id, json_quote, thread_reference_path};
use crate::store::threads::{query_thread, query_threads, ThreadRow};

/// Threads listed in an unknown-reference error.
pub const KNOWN_THREADS_SHOWN: i64 = 8;
/// Candidates fetched for an ambiguity report.
const MAX_CANDIDATES: i64 = 50;

/// Where a reference is resolved from: the manager whose threads it may name, the caller's
/// own path (relative paths start there) and the caller's own thread id, if it has one.
#[derive(Debug, Clone, Copy)]
pub struct RefScope<'a> {
    pub manager_id: i64,
    pub current_path: &'a str,
    pub self_id: Option<&'a str>,
}

/// Resolves a reference to one of the manager's threads.
pub fn resolve(conn: &Connection, scope: RefScope<'_>, reference: &str) -> Result<ThreadRow> {
    let text = reference.trim();
    if is_thread_id(text) {
        return match query_thread(
            conn,
            include_str!("../sql/thread_by_id.sql"),
            (text, scope.manager_id),
        )? {
            Some(row) => Ok(row),
            None => Err(unknown(conn, scope, reference)?),
        };
    }
    if let Some(path) = thread_reference_path(text, scope.current_path) {
        if let Some(row) = query_thread(
            conn,
            include_str!("../sql/thread_by_path.sql"),
            (scope.manager_id, &path),
        )? {
            return Ok(row);
        }
    }
    let mut matches = query_threads(
        conn,
        include_str!("../sql/thread_by_name.sql"),
        (scope.manager_id, text, MAX_CANDIDATES),
    )?;
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => Err(unknown(conn, scope, reference)?),
        _ => {
            let paths: Vec<&str> = matches.iter().map(|t| t.path.as_str()).collect();
            Err(Error::new(
                ErrorCode::AmbiguousReference,
                format!(
                    "Ambiguous thread reference {}. Candidate paths: {}. Repair: use one of the candidate paths or a thread id instead.",
                    json_quote(reference),
                    paths.join(", ")
                ),
            ))
        }
    }
}

/// Resolves a `list.parent` / `list.ancestor` value to a path. `.`, `self` and the caller's
/// own id mean the current path; a syntactically valid path is used as given even if no
/// thread has it; anything else goes through [`resolve`].
pub fn resolve_list_filter(
    conn: &Connection,
    scope: RefScope<'_>,
    reference: &str,
) -> Result<String> {
    let text = reference.trim();
    if text == "." || text == "self" || scope.self_id == Some(text) {
        return Ok(scope.current_path.to_string());
    }
    if is_thread_id(text) {
        return Ok(resolve(conn, scope, reference)?.path);
    }
    // Every path form of step 2, one segment included (`review_docs` is a relative path).
    if let Some(path) = thread_reference_path(text, scope.current_path) {
        return Ok(path);
    }
    Ok(resolve(conn, scope, reference)?.path)
}

fn unknown(conn: &Connection, scope: RefScope<'_>, reference: &str) -> Result<Error> {
    let known = query_threads(
        conn,
        include_str!("../sql/threads_known.sql"),
        (scope.manager_id, KNOWN_THREADS_SHOWN),
    )?;
    let listing = if known.is_empty() {
        "No threads are currently managed by this parent.".to_string()
    } else {
        let items: Vec<String> = known
            .iter()
            .map(|t| format!("{} (id: {}, taskName: {})", t.path, t.id, t.task_name))
            .collect();
        format!("Known threads: {}.", items.join(", "))
    };
    Ok(Error::new(
        ErrorCode::UnknownReference,
        format!(
            "Unknown thread reference: {}. Accepted reference forms: thread id (thread_012345abcdef), canonical path (/root/task), relative path from the current thread (task or parent/task), or unambiguous taskName. {listing} Repair: use a known path/id, run {{ \"action\": \"list\" }}, or start the thread first.",
            json_quote(reference)
        ),
    ))
}
