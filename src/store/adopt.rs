//! Adoption (contract A): a closed thread of another Pi session moves under an adopting
//! session's manager: its row (manager, path, parent, depth), its place in the forest and the
//! places of the threads below it (the new root session's tree, keys and levels), and what
//! that subtree spent (from the old tree's total to the new one's), with a `thread_adopted`
//! event that keeps the old session and path. One transaction; the caller checks first that
//! nothing alive owns the thread (see `engine::adopt`).

use crate::store::Conn;
use rusqlite::{named_params, OptionalExtension};
use serde_json::json;

use super::events::{self, NewEvent};
use super::threads::{path_taken, thread_by_id_any};
use crate::domain::{ManagerId, SessionId, ThreadId, ThreadStatus};
use crate::error::{Error, ErrorCode, Result};

/// A thread of another contract A manager that a reference names exactly (id or canonical
/// path), with its manager's session and owner.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub id: ThreadId,
    pub status: ThreadStatus,
    pub session_id: String,
    pub session_file: Option<String>,
    pub owner_pid: Option<i64>,
    pub owner_started_at: Option<i64>,
    pub created_at: String,
}

/// The threads of contract A managers other than `except` whose id or canonical path is
/// `reference`, newest first (at most 20).
pub fn candidates(
    conn: &Conn,
    reference: &str,
    except: Option<ManagerId>,
) -> Result<Vec<Candidate>> {
    let mut stmt = conn
        .db()
        .prepare_cached(include_str!("../../sql/adopt_candidates.sql"))?;
    let rows = stmt.query_map(rusqlite::params![reference.trim(), except], |r| {
        Ok(Candidate {
            id: r.get("id")?,
            status: r.get("status")?,
            session_id: r.get("session_id")?,
            session_file: r.get("session_file")?,
            owner_pid: r.get("owner_pid")?,
            owner_started_at: r.get("owner_started_at")?,
            created_at: r.get("created_at")?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// What an adoption changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Adopted {
    pub id: ThreadId,
    pub from_session: SessionId,
    pub old_path: String,
    pub path: String,
    /// The threads that moved with it (its descendants in every manager of its tree).
    pub below: i64,
}

/// Moves closed thread `id` under manager `to` (see the module doc); `by` is recorded in the
/// event (`adopt` or `resume`). Refused: a live thread, a thread of `to` already, a path the
/// adopting manager holds, and a path change for a thread with threads below it (their paths
/// name its old one).
pub fn adopt(conn: &Conn, id: &ThreadId, to: ManagerId, by: &str, at: &str) -> Result<Adopted> {
    let row = thread_by_id_any(conn, id)?.ok_or_else(|| {
        Error::new(
            ErrorCode::UnknownReference,
            format!("Unknown thread: {id} (it was removed meanwhile). Repair: list the threads and use a current id."),
        )
    })?;
    if row.manager_id == to {
        return Err(Error::new(
            ErrorCode::Conflict,
            format!(
                "{} ({id}) belongs to this session already. Repair: resume it by its path or id.",
                row.path
            ),
        ));
    }
    if row.status() != ThreadStatus::Closed {
        return Err(Error::new(
            ErrorCode::Conflict,
            format!("{} ({id}) is live: only a closed thread can be adopted. Repair: stop it from its own session, or run `threadbase restore` if that session's serve is gone, then adopt it.", row.path),
        ));
    }
    let (from_session, _) = super::threads::manager_of_thread(conn, id)?.unwrap_or_default();
    let target = conn
        .db()
        .prepare_cached(include_str!("../../sql/adopt_target.sql"))?
        .query_row([to], |r| {
            Ok(Target {
                scope_path: r.get("scope_path")?,
                depth: r.get("depth")?,
                self_thread_id: r.get("self_thread_id")?,
                root_session: r.get("root_session")?,
                forest_parent: r.get("forest_parent")?,
                parent_key: r.get("parent_key")?,
                parent_level: r.get("parent_level")?,
            })
        })
        .optional()?
        .ok_or_else(|| {
            Error::new(
                ErrorCode::Internal,
                format!("The adopting manager {to} has no row. Repair: retry."),
            )
        })?;
    let path = format!("{}/{}", target.scope_path, row.task_name);
    let place = conn
        .db()
        .prepare_cached(include_str!("../../sql/adopt_place.sql"))?
        .query_row([id], |r| {
            Ok(Place {
                root_session: r.get("root_session")?,
                tree_key: r.get("tree_key")?,
                level: r.get("level")?,
                below: r.get("below")?,
            })
        })
        .optional()?
        .ok_or_else(|| {
            Error::new(
                ErrorCode::Internal,
                format!(
                    "{} ({id}) has no place in the forest. Repair: run `threadbase check`.",
                    row.path
                ),
            )
        })?;
    if path != row.path && place.below > 0 {
        return Err(Error::new(
            ErrorCode::Conflict,
            format!("{} ({id}) would become {path} here, and the {} threads below it keep paths under {}. Repair: adopt it from a session at the same level (a top-level Pi session for a /root thread).", row.path, place.below, row.path),
        ));
    }
    if path_taken(conn, to, &path)? {
        return Err(Error::new(
            ErrorCode::Conflict,
            format!("This session has a thread at {path} already, so {} ({id}) cannot take that path. Repair: use this session's own thread at that path, or adopt it from a new Pi session, where the path is free.", row.path),
        ));
    }
    let moved = conn
        .db()
        .prepare_cached(include_str!("../../sql/adopt_thread.sql"))?
        .execute(named_params! {
            ":to": to, ":path": path, ":parent_path": target.scope_path,
            ":parent_id": target.self_thread_id, ":depth": target.depth + 1, ":at": at,
            ":id": id, ":from": row.manager_id,
        })?;
    if moved != 1 {
        return Err(Error::new(
            ErrorCode::Conflict,
            format!(
                "{} ({id}) changed while it was being adopted. Repair: retry.",
                row.path
            ),
        ));
    }
    // What the subtree spent: the integer counts, then the cost.
    let (counts, cost): ([i64; 7], f64) = conn
        .db()
        .prepare_cached(include_str!("../../sql/adopt_subtree_usage.sql"))?
        .query_row(
            named_params! {":root": place.root_session, ":key": place.tree_key},
            |r| {
                let mut counts = [0i64; 7];
                for (c, name) in counts.iter_mut().zip([
                    "threads",
                    "input_tokens",
                    "output_tokens",
                    "cache_read_tokens",
                    "cache_write_tokens",
                    "turns",
                    "tool_calls",
                ]) {
                    *c = r.get(name)?;
                }
                Ok((counts, r.get("cost_usd")?))
            },
        )?;
    let [threads, input, output, cache_read, cache_write, turns, tool_calls] = counts;
    for (root, sign) in [(&place.root_session, -1i64), (&target.root_session, 1)] {
        conn.db()
            .prepare_cached(include_str!("../../sql/adopt_tree_usage_move.sql"))?
            .execute(named_params! {
                ":root": root, ":sign": sign, ":threads": threads, ":input": input,
                ":output": output, ":cache_read": cache_read, ":cache_write": cache_write,
                ":cost": cost, ":turns": turns, ":tool_calls": tool_calls, ":at": at,
            })?;
    }
    let last_segment = place
        .tree_key
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string();
    let new_key = format!("{}/{last_segment}", target.parent_key);
    conn.db()
        .prepare_cached(include_str!("../../sql/adopt_move_places.sql"))?
        .execute(named_params! {
            ":new_root": target.root_session, ":new_key": new_key, ":key": place.tree_key,
            ":level": place.level, ":new_level": target.parent_level + 1, ":id": id,
            ":new_parent": target.forest_parent, ":root": place.root_session,
        })?;
    let data = json!({
        "by": by, "fromSession": from_session, "oldPath": row.path, "path": path,
        "below": place.below,
    })
    .to_string();
    events::append(
        conn,
        id,
        &[NewEvent {
            at,
            kind: "thread_adopted",
            data: &data,
        }],
    )?;
    Ok(Adopted {
        id: row.id,
        from_session,
        old_path: row.path,
        path,
        below: place.below,
    })
}

struct Target {
    scope_path: String,
    depth: i64,
    self_thread_id: Option<String>,
    root_session: String,
    forest_parent: Option<String>,
    parent_key: String,
    parent_level: i64,
}

struct Place {
    root_session: String,
    tree_key: String,
    level: i64,
    below: i64,
}
