//! Adoption (contract A): a closed thread of another Pi session moves under an adopting
//! session's manager: its row (manager, path, parent, depth), its place in the forest and the
//! places of the threads below it (the new root session's tree, keys and levels), and what
//! that subtree spent (from the old tree's total to the new one's), with a `thread_adopted`
//! event that keeps the old session and path. One transaction; the caller checks first that
//! nothing alive owns the thread (see `engine::adopt`).

use crate::store::db::{named, params, q, Row};
use crate::store::Conn;
use serde_json::json;

use super::events::{self, NewEvent};
use super::threads::{path_taken, thread_by_id_any};
use super::usage::{SubtreeUsage, Usage};
use crate::domain::{ManagerId, SessionId, ThreadId, ThreadStatus};
use crate::error::{Error, ErrorCode, Result};
use crate::store::rows::columns;

columns! {
    /// An adoption candidate's columns, in order (`{adopt_candidate_row}` in
    /// `sql/adopt_candidates.sql`, which reads `threads t JOIN managers m`): what [`Candidate`]
    /// holds, read by these positions.
    pub mod candidate_col as "{adopt_candidate_row}" {
        ID = "t.id",
        STATUS = "t.status",
        SESSION_ID = "m.session_id",
        SESSION_FILE = "m.session_file",
        OWNER_PID = "m.owner_pid",
        OWNER_STARTED_AT = "m.owner_started_at",
        OWNER_HOST = "m.host_id",
        OWNER_BOOT = "m.boot_id",
        CREATED_AT = "t.created_at",
    }
}

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
    pub owner_host: Option<String>,
    pub owner_boot: Option<String>,
    pub created_at: String,
}

impl Candidate {
    /// A row of `sql/adopt_candidates.sql` ([`candidate_col`]).
    fn from_row(r: &Row<'_>) -> Result<Candidate> {
        Ok(Candidate {
            id: r.get(candidate_col::ID)?,
            status: r.get(candidate_col::STATUS)?,
            session_id: r.get(candidate_col::SESSION_ID)?,
            session_file: r.get(candidate_col::SESSION_FILE)?,
            owner_pid: r.get(candidate_col::OWNER_PID)?,
            owner_started_at: r.get(candidate_col::OWNER_STARTED_AT)?,
            owner_host: r.get(candidate_col::OWNER_HOST)?,
            owner_boot: r.get(candidate_col::OWNER_BOOT)?,
            created_at: r.get(candidate_col::CREATED_AT)?,
        })
    }
}

/// The threads of contract A managers other than `except` whose id or canonical path is
/// `reference`, newest first (at most 20).
pub fn candidates(
    conn: &Conn,
    reference: &str,
    except: Option<ManagerId>,
) -> Result<Vec<Candidate>> {
    let rows = conn
        .all(
            q!("adopt_candidates", candidate_col),
            params![reference.trim(), except],
            Candidate::from_row,
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
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
        .opt(
            q!("adopt_target", target_col),
            params![to],
            Target::from_row,
        )?
        .ok_or_else(|| {
            Error::new(
                ErrorCode::Internal,
                format!("The adopting manager {to} has no row. Repair: retry."),
            )
        })?;
    let path = format!("{}/{}", target.scope_path, row.task_name);
    let place = conn
        .opt(q!("adopt_place", place_col), params![id], Place::from_row)?
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
    let moved = conn.execute(
        q!("adopt_thread"),
        named! {
            ":to": to, ":path": path, ":parent_path": target.scope_path,
            ":parent_id": target.self_thread_id, ":depth": target.depth + 1, ":at": at,
            ":id": id, ":from": row.manager_id,
        },
    )?;
    if moved != 1 {
        return Err(Error::new(
            ErrorCode::Conflict,
            format!(
                "{} ({id}) changed while it was being adopted. Repair: retry.",
                row.path
            ),
        ));
    }
    // What the subtree spent.
    let spent = conn.one(
        q!("adopt_subtree_usage", spend_col),
        named! {":root": place.root_session, ":key": place.tree_key},
        read_spend,
    )?;
    let (threads, u) = (spent.threads, spent.usage);
    for (root, sign) in [(&place.root_session, -1i64), (&target.root_session, 1)] {
        conn.execute(
            q!("adopt_tree_usage_move"),
            named! {
                ":root": root, ":sign": sign, ":threads": threads, ":input": u.input_tokens,
                ":output": u.output_tokens, ":cache_read": u.cache_read_tokens,
                ":cache_write": u.cache_write_tokens, ":cost": u.cost_usd, ":turns": u.turns,
                ":tool_calls": u.tool_calls, ":at": at,
            },
        )?;
    }
    let last_segment = place
        .tree_key
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_string();
    let new_key = format!("{}/{last_segment}", target.parent_key);
    conn.execute(
        q!("adopt_move_places"),
        named! {
            ":new_root": target.root_session, ":new_key": new_key, ":key": place.tree_key,
            ":level": place.level, ":new_level": target.parent_level + 1, ":id": id,
            ":new_parent": target.forest_parent, ":root": place.root_session,
        },
    )?;
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

columns! {
    /// Where an adopted thread goes (`{adopt_target_row}` in `sql/adopt_target.sql`, which
    /// reads `managers m LEFT JOIN thread_places up`): what [`Target`] holds.
    pub mod target_col as "{adopt_target_row}" {
        SCOPE_PATH = "m.scope_path",
        DEPTH = "m.depth",
        SELF_THREAD_ID = "m.self_thread_id",
        ROOT_SESSION = "coalesce(up.root_session, m.session_id) AS root_session",
        FOREST_PARENT = "up.thread_id AS forest_parent",
        PARENT_KEY = "coalesce(up.tree_key, '') AS parent_key",
        PARENT_LEVEL = "coalesce(up.level, 0) AS parent_level",
    }
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

impl Target {
    /// The row of `sql/adopt_target.sql` ([`target_col`]).
    fn from_row(r: &Row<'_>) -> Result<Target> {
        Ok(Target {
            scope_path: r.get(target_col::SCOPE_PATH)?,
            depth: r.get(target_col::DEPTH)?,
            self_thread_id: r.get(target_col::SELF_THREAD_ID)?,
            root_session: r.get(target_col::ROOT_SESSION)?,
            forest_parent: r.get(target_col::FOREST_PARENT)?,
            parent_key: r.get(target_col::PARENT_KEY)?,
            parent_level: r.get(target_col::PARENT_LEVEL)?,
        })
    }
}

columns! {
    /// An adopted thread's place before it moves (`{adopt_place_row}` in
    /// `sql/adopt_place.sql`, which reads `thread_places p`) and how many threads hang below
    /// it: what [`Place`] holds.
    pub mod place_col as "{adopt_place_row}" {
        ROOT_SESSION = "p.root_session",
        TREE_KEY = "p.tree_key",
        LEVEL = "p.level",
        BELOW = "(SELECT count(*) FROM thread_places d WHERE d.root_session = p.root_session AND d.tree_key > p.tree_key || '/' AND d.tree_key < p.tree_key || '0') AS below",
    }
}

struct Place {
    root_session: String,
    tree_key: String,
    level: i64,
    below: i64,
}

impl Place {
    /// The row of `sql/adopt_place.sql` ([`place_col`]).
    fn from_row(r: &Row<'_>) -> Result<Place> {
        Ok(Place {
            root_session: r.get(place_col::ROOT_SESSION)?,
            tree_key: r.get(place_col::TREE_KEY)?,
            level: r.get(place_col::LEVEL)?,
            below: r.get(place_col::BELOW)?,
        })
    }
}

columns! {
    /// What an adopted subtree spent (`{adopt_spend_row}` in `sql/adopt_subtree_usage.sql`,
    /// which reads `thread_places d JOIN thread_usage u`), read by [`read_spend`].
    pub mod spend_col as "{adopt_spend_row}" {
        THREADS = "count(*) AS threads",
        INPUT_TOKENS = "coalesce(sum(u.input_tokens), 0) AS input_tokens",
        OUTPUT_TOKENS = "coalesce(sum(u.output_tokens), 0) AS output_tokens",
        CACHE_READ_TOKENS = "coalesce(sum(u.cache_read_tokens), 0) AS cache_read_tokens",
        CACHE_WRITE_TOKENS = "coalesce(sum(u.cache_write_tokens), 0) AS cache_write_tokens",
        COST_USD = "coalesce(sum(u.cost_usd), 0) AS cost_usd",
        TURNS = "coalesce(sum(u.turns), 0) AS turns",
        TOOL_CALLS = "coalesce(sum(u.tool_calls), 0) AS tool_calls",
    }
}

/// The row of `sql/adopt_subtree_usage.sql` ([`spend_col`]).
fn read_spend(r: &Row<'_>) -> Result<SubtreeUsage> {
    Ok(SubtreeUsage {
        threads: r.get(spend_col::THREADS)?,
        usage: Usage {
            input_tokens: r.get(spend_col::INPUT_TOKENS)?,
            output_tokens: r.get(spend_col::OUTPUT_TOKENS)?,
            cache_read_tokens: r.get(spend_col::CACHE_READ_TOKENS)?,
            cache_write_tokens: r.get(spend_col::CACHE_WRITE_TOKENS)?,
            cost_usd: r.get(spend_col::COST_USD)?,
            turns: r.get(spend_col::TURNS)?,
            tool_calls: r.get(spend_col::TOOL_CALLS)?,
        },
    })
}
