//! Reference resolution for contract A, in its order, each step one indexed query:
//! thread id (exact, never falls through) → path (canonical, `root/…`, relative) → unique
//! task name or basename across the manager → ambiguous or unknown, with the contract's texts.
//!
//! A session's subtree is wider than its manager: every child Pi runs its own serve, whose
//! manager holds that child's children. When the manager's own threads do not match (unknown,
//! not ambiguous: own threads always win), the same three steps run over the contract A
//! managers below it (`sql/reach_*.sql`, walked down `managers.parent_manager_id`), and a
//! descendant found there answers with its full `/root/…` path. Nothing found there either:
//! the manager's own unknown-reference error, as the contract words it.

use crate::domain::{ManagerId, SessionId, ThreadId};
use crate::store::db::{named, params, q};
use crate::store::Conn;

use crate::error::{Error, ErrorCode, Result};
use crate::paths::{is_thread_id, json_quote, thread_reference_path};
use crate::store::threads::{
    manager_id, query_thread, query_threads, thread_by_id_any, Contract, ThreadRow,
};

/// Threads listed in an unknown-reference error.
pub const KNOWN_THREADS_SHOWN: i64 = 8;
/// Candidates fetched for an ambiguity report.
const MAX_CANDIDATES: i64 = 50;

/// Where a reference is resolved from: the manager whose threads it may name, the caller's
/// own path (relative paths start there) and the caller's own thread id, if it has one.
#[derive(Debug, Clone, Copy)]
pub struct RefScope<'a> {
    pub manager_id: ManagerId,
    pub current_path: &'a str,
    pub self_id: Option<&'a ThreadId>,
}

/// Resolves a reference to one of the manager's threads, else to a descendant held by a
/// manager below it (see the module docs).
pub fn resolve(conn: &Conn, scope: RefScope<'_>, reference: &str) -> Result<ThreadRow> {
    let found = match exact(reference, scope) {
        Some(Exact::Id(id)) => query_thread(
            conn,
            q!("thread_by_id", crate::store::threads::col),
            params![id, scope.manager_id],
        )?,
        Some(Exact::Path(path)) => query_thread(
            conn,
            q!("thread_by_path", crate::store::threads::col),
            params![scope.manager_id, &path],
        )?,
        None => None,
    };
    match found {
        Some(row) => Ok(row),
        None => resolve_past_exact(conn, scope, reference),
    }
}

/// What steps 1 and 2 look up: a thread id, or a canonical path within the manager.
pub enum Exact<'r> {
    Id(&'r str),
    Path(String),
}

/// The exact form of `reference` seen from `scope`, if it has one: an id (step 1, which never
/// falls through to step 2) or a path (step 2).
pub fn exact<'r>(reference: &'r str, scope: RefScope<'_>) -> Option<Exact<'r>> {
    let text = reference.trim();
    if is_thread_id(text) {
        return Some(Exact::Id(text));
    }
    thread_reference_path(text, scope.current_path).map(Exact::Path)
}

/// Resolution once the manager's own threads matched neither step 1 nor step 2 (see
/// [`exact`]): step 3 (a unique task name or basename) for a reference that is not an id, then
/// the managers below; the manager's unknown-reference error when nothing matches. A caller
/// that ran steps 1 and 2 itself (a poll, `store::facts::find`) goes on from here.
pub fn resolve_past_exact(conn: &Conn, scope: RefScope<'_>, reference: &str) -> Result<ThreadRow> {
    match resolve_by_name(conn, scope, reference) {
        Err(e) if e.code == ErrorCode::UnknownReference => {
            match resolve_below(conn, scope, reference)? {
                Some(row) => Ok(row),
                None => Err(e),
            }
        }
        other => other,
    }
}

/// The three steps over the managers below the scope's manager: `None` when nothing matches.
fn resolve_below(conn: &Conn, scope: RefScope<'_>, reference: &str) -> Result<Option<ThreadRow>> {
    let text = reference.trim();
    if is_thread_id(text) {
        return query_thread(
            conn,
            q!("reach_thread_by_id", crate::store::threads::col),
            named! {":manager": scope.manager_id, ":id": text},
        );
    }
    if let Some(path) = thread_reference_path(text, scope.current_path) {
        let mut found = query_threads(
            conn,
            q!("reach_thread_by_path", crate::store::threads::col),
            named! {":manager": scope.manager_id, ":path": &path},
        )?;
        match found.len() {
            0 => {}
            1 => return Ok(found.pop()),
            // Two serves below this one hold a thread at the same path (hand-made rows, or a
            // session file shared by two Pi sessions): only an id tells them apart.
            _ => {
                let ids: Vec<String> = found
                    .iter()
                    .map(|t| format!("{} (id: {})", t.path, t.id))
                    .collect();
                return Err(ambiguous(reference, &ids));
            }
        }
    }
    let mut matches = query_threads(
        conn,
        q!("reach_thread_by_name", crate::store::threads::col),
        named! {":manager": scope.manager_id, ":name": text, ":limit": MAX_CANDIDATES},
    )?;
    match matches.len() {
        0 => Ok(None),
        1 => Ok(matches.pop()),
        _ => {
            let paths: Vec<String> = matches.iter().map(|t| t.path.clone()).collect();
            Err(ambiguous(reference, &paths))
        }
    }
}

fn ambiguous(reference: &str, candidates: &[String]) -> Error {
    Error::new(
        ErrorCode::AmbiguousReference,
        format!(
            "Ambiguous thread reference {}. Candidate paths: {}. Repair: use one of the candidate paths or a thread id instead.",
            json_quote(reference),
            candidates.join(", ")
        ),
    )
}

/// Step 3 over the manager's own threads; an id never reaches it (unknown).
fn resolve_by_name(conn: &Conn, scope: RefScope<'_>, reference: &str) -> Result<ThreadRow> {
    let text = reference.trim();
    if is_thread_id(text) {
        return Err(unknown(conn, scope, reference)?);
    }
    let mut matches = query_threads(
        conn,
        q!("thread_by_name", crate::store::threads::col),
        params![scope.manager_id, text, MAX_CANDIDATES],
    )?;
    match matches.len() {
        1 => Ok(matches.remove(0)),
        0 => Err(unknown(conn, scope, reference)?),
        _ => {
            let paths: Vec<String> = matches.iter().map(|t| t.path.clone()).collect();
            Err(ambiguous(reference, &paths))
        }
    }
}

/// Resolves a `list.parent` / `list.ancestor` value to a path. `.`, `self` and the caller's
/// own id mean the current path; a syntactically valid path is used as given even if no
/// thread has it; anything else goes through [`resolve`].
pub fn resolve_list_filter(conn: &Conn, scope: RefScope<'_>, reference: &str) -> Result<String> {
    let text = reference.trim();
    if text == "." || text == "self" || scope.self_id.map(ThreadId::as_str) == Some(text) {
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

fn unknown(conn: &Conn, scope: RefScope<'_>, reference: &str) -> Result<Error> {
    let known = query_threads(
        conn,
        q!("threads_known", crate::store::threads::col),
        params![scope.manager_id, KNOWN_THREADS_SHOWN],
    )?;
    let listing = if known.is_empty() {
        "No threads are currently managed by this parent.".to_string()
    } else {
        let items: Vec<String> = known
            .iter()
            .map(|t| format!("{} (id: {}, taskName: {})", t.path, t.id, t.task_name))
            .collect();
        // The original joins them with "; " (issue 14, contract A 8).
        format!("Known threads: {}.", items.join("; "))
    };
    // An exact id of a thread that another Pi session holds: say whose it is and how to reach
    // it, since threads belong to the session that started them.
    let (elsewhere, repair_first) = match elsewhere(conn, scope, reference.trim())? {
        Some((session, file, path)) => {
            let file_text = file.as_deref().map_or_else(
                || "its session file is not recorded".to_string(),
                |f| format!("session file {f}"),
            );
            let repair = match file.as_deref() {
                Some(f) => {
                    format!("to use it, continue that session with `pi --session {f}`, or once that session has ended, resume it here by its id to adopt it; otherwise ")
                }
                None => {
                    "to use it, continue that session (`pi --resume` lists sessions), or once that session has ended, resume it here by its id to adopt it; otherwise "
                        .to_string()
                }
            };
            (
                format!(" It is {path} of another Pi session, {session} ({file_text}): threads belong to the session that started them."),
                repair,
            )
        }
        None => (String::new(), String::new()),
    };
    Ok(Error::new(
        ErrorCode::UnknownReference,
        format!(
            "Unknown thread reference: {}.{elsewhere} Accepted reference forms: thread id (thread_012345abcdef), canonical path (/root/task), relative path from the current thread (task or parent/task), or unambiguous taskName. {listing} Repair: {repair_first}use a known path/id, run {{ \"action\": \"list\" }}, or start the thread first.",
            json_quote(reference)
        ),
    ))
}

crate::store::rows::columns! {
    /// Where another session holds a thread (`{thread_elsewhere_row}` in
    /// `sql/thread_elsewhere.sql`, which reads `threads t JOIN managers m LEFT JOIN
    /// thread_places p`): its root session, that session's file and the thread's path.
    pub mod elsewhere_col as "{thread_elsewhere_row}" {
        ROOT_SESSION = "coalesce(p.root_session, m.session_id)",
        SESSION_FILE = "coalesce((SELECT r.session_file FROM managers r WHERE r.session_id = p.root_session AND r.session_file IS NOT NULL ORDER BY r.depth LIMIT 1), m.session_file)",
        PATH = "t.path",
    }
}

/// The root session, its session file and the path of the thread whose id is `reference`,
/// when another session holds it (see sql/thread_elsewhere.sql).
fn elsewhere(
    conn: &Conn,
    scope: RefScope<'_>,
    reference: &str,
) -> Result<Option<(String, Option<String>, String)>> {
    if !is_thread_id(reference) {
        return Ok(None);
    }
    conn.opt(
        q!("thread_elsewhere", elsewhere_col),
        params![reference, scope.manager_id],
        |r| {
            Ok((
                r.get(elsewhere_col::ROOT_SESSION)?,
                r.get(elsewhere_col::SESSION_FILE)?,
                r.get(elsewhere_col::PATH)?,
            ))
        },
    )
}

/// How many threads a CLI reference names at most before it is called ambiguous.
const CANDIDATES: i64 = 20;

/// Finds a thread for the CLI (`inspect`, `usage`). With `--manager`, contract A's full
/// resolution inside that manager; else an id, else an exact path, else a task name, across
/// every manager of the root session `session` (`--session`, already resolved to its root
/// session id) or, without one, of the whole database. Several threads: an ambiguity error
/// naming each candidate's session by name and start time.
pub fn resolve_anywhere(
    conn: &Conn,
    reference: &str,
    manager: Option<&str>,
    session: Option<&crate::store::sessions::SessionInfo>,
) -> Result<ThreadRow> {
    if let Some(session) = manager {
        let mut last_err = None;
        for contract in [Contract::Thread, Contract::Agent, Contract::Worker] {
            if let Some(id) = manager_id(conn, &SessionId::new(session), contract)? {
                let scope = RefScope {
                    manager_id: id,
                    current_path: crate::paths::ROOT,
                    self_id: None,
                };
                match resolve(conn, scope, reference) {
                    Ok(t) => return Ok(t),
                    Err(e) => last_err = Some(e),
                }
            }
        }
        return Err(last_err.unwrap_or_else(|| {
            Error::new(
                ErrorCode::UnknownReference,
                format!("No manager with session id {}. Repair: list managers with `threadbase sql \"SELECT session_id, contract FROM managers\"`, or pick a Pi session with --session ID|NAME|latest.", json_quote(session)),
            )
        }));
    }
    let root = session.map(|s| s.root_session.as_str());
    let text = reference.trim();
    if let Some(t) = thread_by_id_any(conn, &ThreadId::new(text))? {
        let in_session = match root {
            None => true,
            Some(r) => crate::store::sessions::root_of_thread(conn, &t.id)?.as_deref() == Some(r),
        };
        if in_session {
            return Ok(t);
        }
    }
    let path = if text.starts_with('/') {
        text.to_string()
    } else {
        format!("/root/{}", text.trim_start_matches("root/"))
    };
    let by_path = match root {
        None => query_threads(
            conn,
            q!("thread_by_path_any", crate::store::threads::col),
            params![&path, CANDIDATES],
        )?,
        Some(r) => query_threads(
            conn,
            q!("thread_by_path_in_session", crate::store::threads::col),
            params![&path, r, CANDIDATES],
        )?,
    };
    let by_path = if by_path.is_empty() && text.starts_with('/') {
        Vec::new()
    } else {
        by_path
    };
    let candidates = if !by_path.is_empty() {
        by_path
    } else {
        match root {
            None => query_threads(
                conn,
                q!("thread_by_name_any", crate::store::threads::col),
                params![text, CANDIDATES],
            )?,
            Some(r) => query_threads(
                conn,
                q!("thread_by_name_in_session", crate::store::threads::col),
                params![text, r, CANDIDATES],
            )?,
        }
    };
    match candidates.len() {
        1 => Ok(candidates.into_iter().next().expect("one candidate")),
        0 => {
            let (within, repair) = match session {
                Some(s) => (
                    format!(" in session {}", crate::store::sessions::label(s)),
                    "run `threadbase list --session ID|NAME|latest` to see that session's threads, or drop --session to look in every session",
                ),
                None => (String::new(), "run `threadbase list` to see the stored threads"),
            };
            Err(Error::new(
                ErrorCode::UnknownReference,
                format!(
                    "Unknown thread reference: {}{within}. Accepted reference forms: thread id, canonical path, or task name. Repair: {repair}.",
                    json_quote(reference)
                ),
            ))
        }
        _ => Err(ambiguous_across_sessions(conn, reference, &candidates)?),
    }
}

/// The ambiguity error of [`resolve_anywhere`]: each candidate's path and id with its Pi
/// session's name, start time and id (newest session first), and, when they lie in several
/// sessions, a Repair that says to pass `--session`. Two queries and one session-file read per
/// root session, whatever the number of candidates.
fn ambiguous_across_sessions(
    conn: &Conn,
    reference: &str,
    candidates: &[ThreadRow],
) -> Result<Error> {
    use crate::store::sessions;
    let ids: Vec<ThreadId> = candidates.iter().map(|t| t.id.clone()).collect();
    let places = sessions::sessions_of_threads(conn, &ids)?;
    let infos = sessions::infos(conn)?;
    let rank = |root: &str| infos.iter().position(|i| i.root_session == root);
    // (session's rank, newest first; thread) and the session each candidate is in.
    let mut items: Vec<(Option<usize>, String, &ThreadRow)> = candidates
        .iter()
        .map(|t| {
            let (root, manager) = places.get(&t.id).cloned().unwrap_or_default();
            let root = root.unwrap_or(manager);
            (rank(&root), root, t)
        })
        .collect();
    items.sort_by_key(|(rank, _, _)| rank.unwrap_or(usize::MAX));
    let roots: std::collections::HashSet<&str> = items.iter().map(|(_, r, _)| r.as_str()).collect();
    let text: Vec<String> = items
        .iter()
        .map(|(rank, root, t)| {
            let session = match rank {
                Some(i) => sessions::label(&infos[*i]),
                None => format!("(id {root})"),
            };
            format!("{} (id: {}) in session {session}", t.path, t.id)
        })
        .collect();
    let (what, repair) = if roots.len() > 1 {
        let newest = items
            .first()
            .map(|(_, r, _)| r.as_str())
            .unwrap_or_default();
        (
            format!("{} threads in {} Pi sessions", items.len(), roots.len()),
            format!("pass --session with the session's id, name or latest (e.g. `--session {newest}` or `--session latest`) to look in one session, or use a thread id"),
        )
    } else {
        (
            format!("{} threads in one Pi session", items.len()),
            "use one of the candidate paths or a thread id".to_string(),
        )
    };
    Ok(Error::new(
        ErrorCode::AmbiguousReference,
        format!(
            "Ambiguous thread reference {}: {what}. Candidates: {}. Repair: {repair}.",
            json_quote(reference),
            text.join("; ")
        ),
    ))
}
