//! The root sessions of a database, as the inspection commands name and pick them: every Pi
//! session at the top of a tree (across the managers of its children's own serves), where and
//! when it started, and its name; `--session ID|NAME|latest` resolved to one of them.
//!
//! A session's name is read from its session file when a command runs, not recorded: Pi
//! appends a `session_info` entry whenever the session is renamed (the latest wins, an empty
//! name clears it), at any time and with no serve told of it, so a recorded copy would go
//! stale. Reading costs one file per root session (a handful), only where a command shows or
//! matches names.

use crate::store::db::{named, params, q};
use crate::store::Conn;
use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde::Serialize;

use crate::domain::ThreadId;
use crate::error::{Error, ErrorCode, Result};
use crate::paths::json_quote;
use crate::store::rows::columns;

columns! {
    /// A root session with its tree's thread count and its first manager's cwd, start and
    /// session file (`{root_session_row}` in `sql/root_sessions.sql`, which reads
    /// `tree_usage u LEFT JOIN managers m`), read by [`infos`].
    pub mod root_col as "{root_session_row}" {
        ROOT_SESSION = "u.root_session",
        THREADS = "u.threads",
        CWD = "m.cwd",
        STARTED_AT = "m.created_at",
        SESSION_FILE = "m.session_file",
    }
}

columns! {
    /// A manager's session, cwd, start and session file, for a database before V4 (no places)
    /// (`{root_manager_row}` in `sql/forest_root_managers.sql`, which reads `managers`), read
    /// by [`infos`].
    pub mod root_manager_col as "{root_manager_row}" {
        SESSION_ID = "session_id",
        CWD = "cwd",
        STARTED_AT = "created_at",
        SESSION_FILE = "session_file",
    }
}

/// What identifies a root session to a person: where it ran, when, and its name.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub root_session: String,
    /// The working directory of the root session's manager.
    pub cwd: Option<String>,
    /// When the root session's first manager row was written.
    pub started_at: Option<String>,
    /// The root session's name (its last `session_info`), else its first user message.
    pub name: Option<String>,
    /// The latest thread activity shown (a thread's creation or its last event): what
    /// `--session latest` picks by, over every thread.
    pub last_activity: Option<String>,
    /// The name Pi records (`session_info`), without the first-message fallback: what
    /// `--session NAME` matches first.
    #[serde(skip)]
    pub pi_name: Option<String>,
}

/// Longest root-session name shown.
const NAME_CHARS: usize = 60;

/// The shortest session-id prefix `--session` accepts.
pub const MIN_PREFIX: usize = 8;

/// Sessions listed in a `--session` error.
const SESSIONS_SHOWN: usize = 12;

/// Managers a session-id prefix reads at most.
const PREFIX_MANAGERS: i64 = 200;

/// Every root session of the database, newest first (by start time, then id): one query, then
/// one session-file read per root. On a database before V4 (no places), every manager's session.
pub fn infos(conn: &Conn) -> Result<Vec<SessionInfo>> {
    let mut out: Vec<SessionInfo> = Vec::new();
    if crate::store::usage::has_tables(conn)? {
        let rows = conn
            .all(q!("root_sessions", root_col), params![], |r| {
                Ok((
                    r.get::<String>(root_col::ROOT_SESSION)?,
                    r.get::<Option<String>>(root_col::CWD)?,
                    r.get::<Option<String>>(root_col::STARTED_AT)?,
                    r.get::<Option<String>>(root_col::SESSION_FILE)?,
                ))
            })?
            .into_iter()
            .map(Ok::<_, crate::error::Error>);
        for row in rows {
            let (session, cwd, started_at, file) = row?;
            out.push(info(session, cwd, started_at, file.as_deref()));
        }
    } else {
        let rows = conn
            .all(
                q!("forest_root_managers", root_manager_col),
                params![],
                |r| {
                    Ok((
                        r.get::<String>(root_manager_col::SESSION_ID)?,
                        r.get::<Option<String>>(root_manager_col::CWD)?,
                        r.get::<Option<String>>(root_manager_col::STARTED_AT)?,
                        r.get::<Option<String>>(root_manager_col::SESSION_FILE)?,
                    ))
                },
            )?
            .into_iter()
            .map(Ok::<_, crate::error::Error>);
        let mut seen = HashSet::new();
        for row in rows {
            let (session, cwd, started_at, file) = row?;
            if seen.insert(session.clone()) {
                out.push(info(session, cwd, started_at, file.as_deref()));
            }
        }
    }
    sort_newest_first(&mut out);
    Ok(out)
}

/// Newest first: by start time, then id (UUIDv7 session ids grow with time); a session with no
/// recorded start last.
pub fn sort_newest_first(sessions: &mut [SessionInfo]) {
    sessions.sort_by(|a, b| {
        (b.started_at.is_some(), &b.started_at, &b.root_session).cmp(&(
            a.started_at.is_some(),
            &a.started_at,
            &a.root_session,
        ))
    });
}

fn info(
    session: String,
    cwd: Option<String>,
    started_at: Option<String>,
    file: Option<&str>,
) -> SessionInfo {
    let read = file.map(|f| crate::pi::session::session_title_parts(Path::new(f)));
    let (pi_name, name) = match read {
        Some(Ok((pi_name, first_user))) => {
            let title = pi_name.clone().or(first_user);
            (pi_name, title.map(|t| one_line(&t)))
        }
        _ => (None, None),
    };
    SessionInfo {
        root_session: session,
        cwd,
        started_at,
        name,
        last_activity: None,
        pi_name,
    }
}

/// A title on one line, cut to [`NAME_CHARS`].
fn one_line(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > NAME_CHARS {
        format!(
            "{}…",
            one_line.chars().take(NAME_CHARS - 1).collect::<String>()
        )
    } else {
        one_line
    }
}

/// The root session with the most recent thread activity, if any thread is placed.
pub fn latest(conn: &Conn) -> Result<Option<String>> {
    if !crate::store::usage::has_tables(conn)? {
        return Ok(None);
    }
    conn.opt(q!("root_session_latest"), params![], |r| r.get(0))
}

columns! {
    /// A manager's session id and the root session of its tree (`{manager_root_row}` in
    /// `sql/root_sessions_of_managers.sql`, which reads `managers m`), read by
    /// [`managers_by_prefix`].
    pub mod manager_root_col as "{manager_root_row}" {
        SESSION_ID = "m.session_id",
        ROOT_SESSION = "coalesce((SELECT p.root_session FROM thread_places p WHERE p.thread_id = m.self_thread_id), (SELECT p.root_session FROM threads t JOIN thread_places p ON p.thread_id = t.id WHERE t.manager_id = m.id LIMIT 1), (SELECT p.root_session FROM thread_places p WHERE p.thread_id = m.session_id))",
    }
}

/// The managers whose session id starts with `prefix`, each with the root session of the tree
/// it sits in (None: it has no placed thread).
fn managers_by_prefix(conn: &Conn, prefix: &str) -> Result<Vec<(String, Option<String>)>> {
    // Session ids are ASCII: every id that starts with the prefix sorts below prefix + U+10FFFF.
    let hi = format!("{prefix}\u{10FFFF}");
    let rows = conn
        .all(
            q!("root_sessions_of_managers", manager_root_col),
            named! {":lo": prefix, ":hi": hi, ":limit": PREFIX_MANAGERS},
            |r| {
                Ok((
                    r.get(manager_root_col::SESSION_ID)?,
                    r.get(manager_root_col::ROOT_SESSION)?,
                ))
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

columns! {
    /// A thread's root session and manager session (`{thread_sessions_row}` in
    /// `sql/sessions_of_threads.sql`, which reads `json_each(?1) j JOIN threads t JOIN managers
    /// m LEFT JOIN thread_places p`), read by [`sessions_of_threads`].
    pub mod thread_sessions_col as "{thread_sessions_row}" {
        THREAD_ID = "j.value",
        ROOT_SESSION = "p.root_session",
        MANAGER_SESSION = "m.session_id",
    }
}

columns! {
    /// The same for a database before V4, which has no places (`{thread_managers_row}` in
    /// `sql/managers_of_threads.sql`, which reads `json_each(?1) j JOIN threads t JOIN managers
    /// m`): no root session.
    pub mod thread_managers_col as "{thread_managers_row}" {
        THREAD_ID = "j.value",
        ROOT_SESSION = "NULL AS root_session",
        MANAGER_SESSION = "m.session_id",
    }
}

/// Each thread's root session (None before V4) and manager session, for the ids given: one
/// query.
pub fn sessions_of_threads(
    conn: &Conn,
    ids: &[ThreadId],
) -> Result<HashMap<ThreadId, (Option<String>, String)>> {
    let ids = serde_json::to_string(ids)?;
    let has_places = crate::store::usage::has_tables(conn)?;
    let (sql, [thread, root, manager]) = if has_places {
        use thread_sessions_col as c;
        let sql = q!("sessions_of_threads", c);
        (sql, [c::THREAD_ID, c::ROOT_SESSION, c::MANAGER_SESSION])
    } else {
        use thread_managers_col as c;
        let sql = q!("managers_of_threads", c);
        (sql, [c::THREAD_ID, c::ROOT_SESSION, c::MANAGER_SESSION])
    };
    let rows = conn
        .all(sql, params![ids], |r| {
            Ok((r.get(thread)?, (r.get(root)?, r.get(manager)?)))
        })?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

/// The root session of a thread's tree (None before V4, or for an unplaced thread).
pub fn root_of_thread(conn: &Conn, id: &ThreadId) -> Result<Option<String>> {
    if !crate::store::usage::has_tables(conn)? {
        return Ok(None);
    }
    conn.opt(
        q!("usage_place", crate::store::usage::place_col),
        params![id],
        |r| r.get(crate::store::usage::place_col::ROOT_SESSION),
    )
}

/// Resolves `--session ID|NAME|latest` to one root session, in this order: `latest` (the most
/// recent thread activity); a root session's id; a manager's session id (a child Pi's own
/// serve: its tree's root); a prefix of at least [`MIN_PREFIX`] characters of either; the
/// session's name as Pi records it, then its title (first user message), case aside. Nothing
/// or several: an error listing sessions by name and start time.
pub fn select(conn: &Conn, selector: &str) -> Result<SessionInfo> {
    if !crate::store::usage::has_tables(conn)? {
        return Err(Error::new(
            ErrorCode::InvalidParams,
            "--session needs a database of schema version 4 or newer (each thread's place in its session's tree). Repair: run `threadbase restore` (or start any threadbase serve) on it once to migrate it, or use --manager SESSION_ID.",
        ));
    }
    let all = infos(conn)?;
    let text = selector.trim();
    let pick = |root: &str| all.iter().find(|i| i.root_session == root).cloned();
    if text.eq_ignore_ascii_case("latest") {
        let found = latest(conn)?.and_then(|root| pick(&root));
        return found.ok_or_else(|| no_session(text, &all));
    }
    if text.is_empty() {
        return Err(no_session(text, &all));
    }
    if let Some(i) = pick(text) {
        return Ok(i);
    }
    let managers = managers_by_prefix(conn, text)?;
    if let Some(i) = managers
        .iter()
        .find(|(session, _)| session == text)
        .and_then(|(_, root)| pick(root.as_deref()?))
    {
        return Ok(i);
    }
    if text.chars().count() >= MIN_PREFIX {
        let mut roots: Vec<&str> = all
            .iter()
            .map(|i| i.root_session.as_str())
            .filter(|r| r.starts_with(text))
            .collect();
        roots.extend(managers.iter().filter_map(|(_, root)| root.as_deref()));
        if let Some(found) = one_of(text, &all, &roots)? {
            return Ok(found);
        }
    }
    for name_of in [
        (|i: &SessionInfo| i.pi_name.clone()) as fn(&SessionInfo) -> Option<String>,
        |i: &SessionInfo| i.name.clone(),
    ] {
        let roots: Vec<&str> = all
            .iter()
            .filter(|i| name_of(i).is_some_and(|n| n.to_lowercase() == text.to_lowercase()))
            .map(|i| i.root_session.as_str())
            .collect();
        if let Some(found) = one_of(text, &all, &roots)? {
            return Ok(found);
        }
    }
    Err(no_session(text, &all))
}

/// The one session among `roots` (duplicates allowed), an ambiguity error for several, None
/// for none.
fn one_of(selector: &str, all: &[SessionInfo], roots: &[&str]) -> Result<Option<SessionInfo>> {
    let set: HashSet<&str> = roots.iter().copied().collect();
    let found: Vec<&SessionInfo> = all
        .iter()
        .filter(|i| set.contains(i.root_session.as_str()))
        .collect();
    match found.len() {
        0 => Ok(None),
        1 => Ok(Some(found[0].clone())),
        n => Err(Error::new(
            ErrorCode::AmbiguousReference,
            format!(
                "--session {} matches {n} Pi sessions: {}. Repair: pass --session with one of these session ids (or a longer prefix of one), or latest.",
                json_quote(selector),
                listing(found.into_iter())
            ),
        )),
    }
}

fn no_session(selector: &str, all: &[SessionInfo]) -> Error {
    let known = if all.is_empty() {
        "The database holds no sessions with threads.".to_string()
    } else {
        format!("Sessions, newest first: {}.", listing(all.iter()))
    };
    Error::new(
        ErrorCode::UnknownReference,
        format!(
            "No Pi session matches --session {}. {known} Repair: pass --session with a session id (or a prefix of at least {MIN_PREFIX} characters), a session's name, or latest; `threadbase tree` shows every session.",
            json_quote(selector)
        ),
    )
}

/// Sessions as a `; `-separated list (at most [`SESSIONS_SHOWN`], then how many more).
fn listing<'a>(sessions: impl Iterator<Item = &'a SessionInfo>) -> String {
    let all: Vec<&SessionInfo> = sessions.collect();
    let mut items: Vec<String> = all.iter().take(SESSIONS_SHOWN).map(|i| label(i)).collect();
    if all.len() > SESSIONS_SHOWN {
        items.push(format!("and {} more", all.len() - SESSIONS_SHOWN));
    }
    items.join("; ")
}

/// A session as a person tells it apart: `"Plan the release" started 2026-12-01 10:00:00 (id
/// 019a…)`; `(unnamed)` without a name.
pub fn label(i: &SessionInfo) -> String {
    let name = match &i.name {
        Some(n) => format!("\"{n}\""),
        None => "(unnamed)".to_string(),
    };
    let started = match &i.started_at {
        Some(at) => format!(" started {}", short_time(at)),
        None => String::new(),
    };
    format!("{name}{started} (id {})", i.root_session)
}

/// `2026-12-01T22:52:26.897Z` → `2026-12-01 22:52:26`.
pub fn short_time(iso: &str) -> String {
    iso.get(..19).unwrap_or(iso).replace('T', " ")
}
