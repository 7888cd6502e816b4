//! The rows of one tree with each thread's own and its subtree's spend, a thread's place
//! (its root session and tree key), and every tree's total: what `threadbase usage` prints.

use super::*;
use crate::store::db::{params, q};

columns! {
    /// A tree's thread row's columns, in order (`{usage_tree_thread_row}` in
    /// `sql/usage_tree_rows.sql`, which reads `subtree_usage s`, `thread_places p`, `threads t`,
    /// `managers m` and `thread_usage u`): what [`TreeRow`] holds, read by these positions.
    pub mod tree_row_col as "{usage_tree_thread_row}" {
        ID = "s.thread_id",
        PATH = "t.path",
        MANAGER_SESSION = "m.session_id",
        CONTRACT = "m.contract",
        LEVEL = "p.level",
        FOREST_PARENT_ID = "p.forest_parent_id",
        STATUS = "t.status",
        PHASE = "t.phase",
        AGENT_STATE = "t.agent_state",
        NAME = "t.name",
        INPUT_TOKENS = "u.input_tokens",
        OUTPUT_TOKENS = "u.output_tokens",
        CACHE_READ_TOKENS = "u.cache_read_tokens",
        CACHE_WRITE_TOKENS = "u.cache_write_tokens",
        COST_USD = "u.cost_usd",
        TURNS = "u.turns",
        TOOL_CALLS = "u.tool_calls",
        SUBTREE_THREADS = "s.threads",
        SUBTREE_INPUT_TOKENS = "s.input_tokens",
        SUBTREE_OUTPUT_TOKENS = "s.output_tokens",
        SUBTREE_CACHE_READ_TOKENS = "s.cache_read_tokens",
        SUBTREE_CACHE_WRITE_TOKENS = "s.cache_write_tokens",
        SUBTREE_COST_USD = "s.cost_usd",
        SUBTREE_TURNS = "s.turns",
        SUBTREE_TOOL_CALLS = "s.tool_calls",
        TREE_KEY = "s.tree_key",
        EXIT_KIND = "t.exit_kind",
        EXIT_CODE = "t.exit_code",
        EXIT_SIGNAL = "t.exit_signal",
        OWNER_PID = "t.owner_pid",
        OWNER_STARTED_AT = "t.owner_started_at",
    }
}

/// One thread of a tree with its own and its subtree's spend, and what its state in words is
/// made of (sql/usage_tree_rows.sql).
#[derive(Debug, Clone)]
pub struct TreeRow {
    pub id: String,
    pub path: String,
    pub manager_session: String,
    pub contract: crate::domain::Contract,
    /// 1 at the top of the tree.
    pub level: i64,
    pub forest_parent_id: Option<String>,
    pub status: crate::domain::ThreadStatus,
    pub phase: crate::domain::Phase,
    pub agent_state: Option<crate::domain::AgentState>,
    pub name: String,
    pub usage: Usage,
    pub subtree: SubtreeUsage,
    pub tree_key: String,
    pub exit_kind: Option<crate::domain::ExitKind>,
    pub exit_code: Option<i64>,
    pub exit_signal: Option<String>,
    /// The holding serve (whether it is still alive is the caller's question).
    pub owner_pid: Option<i64>,
    pub owner_started_at: Option<i64>,
}

/// The rows of `root`'s tree whose keys are `key` or below it (`None`: the whole tree), in
/// tree order: one range of the tree's keys.
pub fn tree_rows(conn: &Conn, root: &SessionId, key: Option<&str>) -> Result<Vec<TreeRow>> {
    let (lo, hi) = match key {
        Some(k) => (k.to_string(), format!("{k}0")),
        None => ("/".to_string(), "0".to_string()),
    };
    let rows = conn
        .all(
            q!("usage_tree_rows", tree_row_col),
            params![root, &lo, &hi],
            |r| {
                use tree_row_col as c;
                Ok(TreeRow {
                    id: r.get(c::ID)?,
                    path: r.get(c::PATH)?,
                    manager_session: r.get(c::MANAGER_SESSION)?,
                    contract: r.get(c::CONTRACT)?,
                    level: r.get(c::LEVEL)?,
                    forest_parent_id: r.get(c::FOREST_PARENT_ID)?,
                    status: r.get(c::STATUS)?,
                    phase: r.get(c::PHASE)?,
                    agent_state: r.get(c::AGENT_STATE)?,
                    name: r.get(c::NAME)?,
                    usage: Usage::at(
                        r,
                        [
                            c::INPUT_TOKENS,
                            c::OUTPUT_TOKENS,
                            c::CACHE_READ_TOKENS,
                            c::CACHE_WRITE_TOKENS,
                            c::COST_USD,
                            c::TURNS,
                            c::TOOL_CALLS,
                        ],
                    )?,
                    subtree: SubtreeUsage {
                        threads: r.get(c::SUBTREE_THREADS)?,
                        usage: Usage::at(
                            r,
                            [
                                c::SUBTREE_INPUT_TOKENS,
                                c::SUBTREE_OUTPUT_TOKENS,
                                c::SUBTREE_CACHE_READ_TOKENS,
                                c::SUBTREE_CACHE_WRITE_TOKENS,
                                c::SUBTREE_COST_USD,
                                c::SUBTREE_TURNS,
                                c::SUBTREE_TOOL_CALLS,
                            ],
                        )?,
                    },
                    tree_key: r.get(c::TREE_KEY)?,
                    exit_kind: r.get(c::EXIT_KIND)?,
                    exit_code: r.get(c::EXIT_CODE)?,
                    exit_signal: r.get(c::EXIT_SIGNAL)?,
                    owner_pid: r.get(c::OWNER_PID)?,
                    owner_started_at: r.get(c::OWNER_STARTED_AT)?,
                })
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    let mut out: Vec<TreeRow> = rows.collect::<Result<_>>()?;
    // [K, K0) also holds keys that extend K's last segment: keep K and what is below it.
    if let Some(k) = key {
        out.retain(|r| r.tree_key == k || r.tree_key.as_bytes().get(k.len()) == Some(&b'/'));
    }
    Ok(out)
}

columns! {
    /// A thread's place (`{usage_place_row}` in `sql/usage_place.sql`, which reads
    /// `thread_places`): its root session and tree key, read by [`place_of`].
    pub mod place_col as "{usage_place_row}" {
        ROOT_SESSION = "root_session",
        TREE_KEY = "tree_key",
    }
}

/// The root session and tree key of a thread's place (sql/usage_place.sql).
pub fn place_of(conn: &Conn, id: &ThreadId) -> Result<(String, String)> {
    conn.one(q!("usage_place", place_col), params![id], |r| {
        Ok((r.get(place_col::ROOT_SESSION)?, r.get(place_col::TREE_KEY)?))
    })
}

columns! {
    /// Whose tree a row of `tree_usage` totals and its thread count (`{usage_tree_row}`,
    /// before its `{usage_row}` in `sql/usage_trees.sql`).
    pub mod tree_col as "{usage_tree_row}" {
        ROOT_SESSION = "root_session",
        THREADS = "threads",
    }
}

/// Every root session's total: its threads' and its own turns' (as its Pi extension reported
/// them; nothing on a database from before schema version 9).
pub fn trees(conn: &Conn) -> Result<Vec<TreeUsage>> {
    let rows = conn
        .all(q!("usage_trees", tree_col, col), params![], |r| {
            Ok(TreeUsage {
                root_session: r.get(tree_col::ROOT_SESSION)?,
                threads: r.get(tree_col::THREADS)?,
                usage: Usage::from_columns(r, tree_col::COUNT)?,
                session: Usage::default(),
            })
        })?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    let mut trees: Vec<TreeUsage> = rows.collect::<Result<_>>()?;
    for (session, own) in all_sessions(conn)? {
        match trees.iter_mut().find(|t| t.root_session == session) {
            Some(t) => {
                t.usage.add(&own);
                t.session = own;
            }
            // A root session that spent but started no thread yet.
            None => trees.push(TreeUsage {
                root_session: session,
                threads: 0,
                usage: own,
                session: own,
            }),
        }
    }
    trees.sort_by(|a, b| a.root_session.cmp(&b.root_session));
    Ok(trees)
}
