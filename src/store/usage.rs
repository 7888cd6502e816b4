//! What threads spent: tokens and cost summed from Pi's per-message usage (`thread_usage`),
//! rolled up per subtree (`subtree_usage`) and per root session's whole tree (`tree_usage`).
//! Like Pi 1.6's own session cost, a thread's spend is its assistant messages' usage plus the
//! usage Pi reports beside them (tool results' nested calls, `usage` entries, compactions).
//!
//! The rows are written by the ingest writer in the same transaction as the events of the
//! message, so usage is exactly as durable as events: a batch is counted once or not at all.
//! What a crashed serve never recorded is read back from the thread's Pi session file by the
//! restore pass ([`reconcile`]), using `turns` as the count of messages already counted.

use crate::store::db::{named, params, q, Row};
use crate::store::Conn;
use serde::Serialize;
use serde_json::Value;

use crate::domain::{SessionId, ThreadId};
use crate::error::Result;
use crate::pi::events;
use crate::store::rows::columns;
use crate::store::{batch_col, ThreadIds};

columns! {
    /// A usage row's counts, in order (`{usage_row}`, after the columns that say whose they are
    /// in `sql/usage_of_thread.sql`, `usage_all`, `usage_of_threads`, `usage_subtree`,
    /// `usage_trees` and `session_usage_all`, which read one of `thread_usage`,
    /// `subtree_usage`, `tree_usage` or `session_usage`: they name their counts alike): what
    /// [`Usage`] holds, read by [`Usage::from_columns`].
    pub mod col as "{usage_row}" {
        INPUT_TOKENS = "input_tokens",
        OUTPUT_TOKENS = "output_tokens",
        CACHE_READ_TOKENS = "cache_read_tokens",
        CACHE_WRITE_TOKENS = "cache_write_tokens",
        COST_USD = "cost_usd",
        TURNS = "turns",
        TOOL_CALLS = "tool_calls",
    }
}

/// Tokens, cost and counts; one message's, or a sum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read_tokens: i64,
    pub cache_write_tokens: i64,
    pub cost_usd: f64,
    /// Completed assistant messages.
    pub turns: i64,
    /// Tool calls those messages made.
    pub tool_calls: i64,
}

/// A number as a non-negative token count (missing, negative or not a number: 0).
fn count(n: Option<f64>) -> i64 {
    match n {
        Some(n) if n.is_finite() && n > 0.0 => n.min(9_007_199_254_740_991.0) as i64,
        _ => 0,
    }
}

impl Usage {
    /// The usage of one completed assistant message (Pi 1.6's `message.usage`: `input`,
    /// `output`, `cacheRead`, `cacheWrite`, `cost.total`), counted as one turn with as many
    /// tool calls as it has `toolCall` blocks. Missing or malformed fields count as zero.
    pub fn of_assistant_message(msg: &Value) -> Usage {
        Usage::of_message(&events::read::<events::Message>(msg).unwrap_or_default())
    }

    /// [`Usage::of_assistant_message`] of a message already read.
    pub fn of_message(msg: &events::Message) -> Usage {
        Usage {
            turns: 1,
            tool_calls: msg.tool_calls() as i64,
            ..Usage::of_pi(&msg.usage.unwrap_or_default())
        }
    }

    /// A Pi usage object alone (`{input, output, cacheRead, cacheWrite, cost: {total}}`), as
    /// Pi 1.6 also puts on a tool result (nested model calls), a `usage` session entry (a
    /// cache warm-up) and a compaction result: spend that is not a turn.
    pub fn of_usage(u: &Value) -> Usage {
        Usage::of_pi(&events::read::<events::Usage>(u).unwrap_or_default())
    }

    /// [`Usage::of_usage`] of a usage object already read.
    pub fn of_pi(u: &events::Usage) -> Usage {
        let cost = u.cost.and_then(|c| c.total).unwrap_or(0.0);
        Usage {
            input_tokens: count(u.input),
            output_tokens: count(u.output),
            cache_read_tokens: count(u.cache_read),
            cache_write_tokens: count(u.cache_write),
            cost_usd: if cost.is_finite() && cost > 0.0 {
                cost
            } else {
                0.0
            },
            turns: 0,
            tool_calls: 0,
        }
    }

    /// Whether it spent nothing.
    pub fn is_zero(&self) -> bool {
        *self == Usage::default()
    }

    /// Adds `other` to this sum.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self
            .cache_read_tokens
            .saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self
            .cache_write_tokens
            .saturating_add(other.cache_write_tokens);
        self.cost_usd += other.cost_usd;
        self.turns = self.turns.saturating_add(other.turns);
        self.tool_calls = self.tool_calls.saturating_add(other.tool_calls);
    }

    /// Every token: input, output, cache reads and cache writes (Pi's `totalTokens`). The
    /// token budget counts this.
    pub fn total_tokens(&self) -> i64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cache_read_tokens)
            .saturating_add(self.cache_write_tokens)
    }

    /// The [`col`] row that starts at position `first` of `r`.
    pub fn from_columns(r: &Row<'_>, first: usize) -> Result<Usage> {
        Usage::at(
            r,
            [
                first + col::INPUT_TOKENS,
                first + col::OUTPUT_TOKENS,
                first + col::CACHE_READ_TOKENS,
                first + col::CACHE_WRITE_TOKENS,
                first + col::COST_USD,
                first + col::TURNS,
                first + col::TOOL_CALLS,
            ],
        )
    }

    /// The usage in the columns at positions `at` of `r`: input, output, cache read and cache
    /// write tokens, cost, turns and tool calls, in that order (a NULL counts as 0). For a row
    /// whose counts are other expressions than [`col`]'s, by the positions of its own
    /// declaration.
    pub fn at(r: &Row<'_>, at: [usize; 7]) -> Result<Usage> {
        let [input, output, cache_read, cache_write, cost, turns, tool_calls] = at;
        Ok(Usage {
            input_tokens: r.get::<Option<i64>>(input)?.unwrap_or(0),
            output_tokens: r.get::<Option<i64>>(output)?.unwrap_or(0),
            cache_read_tokens: r.get::<Option<i64>>(cache_read)?.unwrap_or(0),
            cache_write_tokens: r.get::<Option<i64>>(cache_write)?.unwrap_or(0),
            cost_usd: r.get::<Option<f64>>(cost)?.unwrap_or(0.0),
            turns: r.get::<Option<i64>>(turns)?.unwrap_or(0),
            tool_calls: r.get::<Option<i64>>(tool_calls)?.unwrap_or(0),
        })
    }
}

/// Adds `u` to a thread's row (its tree's total follows by trigger). A thread without a row
/// (deleted meanwhile) changes nothing.
pub fn add(conn: &Conn, thread_id: &ThreadId, u: &Usage, at: &str) -> Result<()> {
    conn.execute(
        q!("usage_add"),
        named! {
            ":input": u.input_tokens, ":output": u.output_tokens,
            ":cache_read": u.cache_read_tokens, ":cache_write": u.cache_write_tokens,
            ":cost": u.cost_usd, ":turns": u.turns, ":tool_calls": u.tool_calls,
            ":at": at, ":id": thread_id,
        },
    )?;
    Ok(())
}

/// One thread's own usage.
pub fn of_thread(conn: &Conn, thread_id: &ThreadId) -> Result<Option<Usage>> {
    conn.opt(q!("usage_of_thread", col), params![thread_id], |r| {
        Usage::from_columns(r, 0)
    })
}

/// Whether the database has the usage tables: read-only commands can open a database written
/// by an older version that no serve of this one has migrated yet.
pub fn has_tables(conn: &Conn) -> Result<bool> {
    Ok(conn.one(q!("usage_schema"), params![], |r| r.get::<i64>(0))? > 0)
}

/// The error for a command that needs the usage tables on a database without them.
pub fn not_migrated() -> crate::error::Error {
    crate::error::Error::io(
        "This database predates usage accounting (its schema is older than version 4), so it records no usage yet. Repair: run `threadbase restore` (or start any threadbase serve) on it once; that migrates it, and usage is recorded from then on.",
    )
}

/// Every thread's own usage, by thread id (empty on a database without the usage tables).
pub fn all_if_any(conn: &Conn) -> Result<std::collections::HashMap<String, Usage>> {
    if !has_tables(conn)? {
        return Ok(Default::default());
    }
    all(conn)
}

columns! {
    /// Whose usage a row of `thread_usage` is (`{usage_thread_row}`, before its `{usage_row}`
    /// in `sql/usage_all.sql`).
    pub mod thread_col as "{usage_thread_row}" {
        THREAD_ID = "thread_id",
    }
}

/// Every thread's own usage, by thread id.
pub fn all(conn: &Conn) -> Result<std::collections::HashMap<String, Usage>> {
    let rows = conn.all(q!("usage_all", thread_col, col), params![], |r| {
        Ok((
            r.get(thread_col::THREAD_ID)?,
            Usage::from_columns(r, thread_col::COUNT)?,
        ))
    })?;
    Ok(rows.into_iter().collect())
}

/// A thread with all of its descendants, across every manager of its tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubtreeUsage {
    /// Threads in the subtree, the thread itself included.
    pub threads: i64,
    #[serde(flatten)]
    pub usage: Usage,
}

columns! {
    /// How many threads a subtree holds (`{usage_subtree_row}`, before its `{usage_row}` in
    /// `sql/usage_subtree.sql`, which reads `subtree_usage`).
    pub mod subtree_col as "{usage_subtree_row}" {
        THREADS = "threads",
    }
}

/// What `thread_id` and its descendants spent (one range of `thread_places_by_key`).
pub fn of_subtree(conn: &Conn, thread_id: &ThreadId) -> Result<Option<SubtreeUsage>> {
    Ok(conn
        .opt(
            q!("usage_subtree", subtree_col, col),
            params![thread_id],
            |r| {
                Ok(SubtreeUsage {
                    threads: r.get(subtree_col::THREADS)?,
                    usage: Usage::from_columns(r, subtree_col::COUNT)?,
                })
            },
        )?
        .filter(|s| s.threads > 0))
}

/// Whom a budget check is about: the thread acted on (resume, send, steer) or, for new work,
/// the serve's own place (its thread id when it is a managed child, and its session id).
#[derive(Debug, Clone, Copy)]
pub struct TreeOf<'a> {
    pub thread_id: Option<&'a ThreadId>,
    pub self_id: Option<&'a ThreadId>,
    pub session_id: &'a SessionId,
}

/// A root session's whole tree: its total and how many threads it has. The total counts the
/// root session's own turns (`session`, reported by its Pi extension) with its threads'.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeUsage {
    pub root_session: String,
    pub threads: i64,
    #[serde(flatten)]
    pub usage: Usage,
    /// The root session's own turns (`session_usage`), already part of `usage`.
    pub session: Usage,
}

columns! {
    /// A tree's spend, its own turns' added (`{usage_tree_of_row}` in `sql/usage_tree_of.sql`,
    /// which reads `root r LEFT JOIN tree_usage LEFT JOIN session_usage`): what
    /// [`TreeUsage`] holds.
    pub mod tree_of_col as "{usage_tree_of_row}" {
        ROOT_SESSION = "r.session_id",
        THREADS = "coalesce(tree_usage.threads, 0)",
        INPUT_TOKENS = "coalesce(tree_usage.input_tokens, 0) + coalesce(session_usage.input_tokens, 0)",
        OUTPUT_TOKENS = "coalesce(tree_usage.output_tokens, 0) + coalesce(session_usage.output_tokens, 0)",
        CACHE_READ_TOKENS = "coalesce(tree_usage.cache_read_tokens, 0) + coalesce(session_usage.cache_read_tokens, 0)",
        CACHE_WRITE_TOKENS = "coalesce(tree_usage.cache_write_tokens, 0) + coalesce(session_usage.cache_write_tokens, 0)",
        COST_USD = "coalesce(tree_usage.cost_usd, 0) + coalesce(session_usage.cost_usd, 0)",
        TURNS = "coalesce(tree_usage.turns, 0) + coalesce(session_usage.turns, 0)",
        TOOL_CALLS = "coalesce(tree_usage.tool_calls, 0) + coalesce(session_usage.tool_calls, 0)",
        SESSION_INPUT_TOKENS = "session_usage.input_tokens",
        SESSION_OUTPUT_TOKENS = "session_usage.output_tokens",
        SESSION_CACHE_READ_TOKENS = "session_usage.cache_read_tokens",
        SESSION_CACHE_WRITE_TOKENS = "session_usage.cache_write_tokens",
        SESSION_COST_USD = "session_usage.cost_usd",
        SESSION_TURNS = "session_usage.turns",
        SESSION_TOOL_CALLS = "session_usage.tool_calls",
    }
}

/// The spend of the tree `of` belongs to: one primary-key lookup in `tree_usage` once the root
/// is found (each candidate a primary-key lookup in `thread_places`). A tree with no threads
/// yet has spent nothing.
pub fn tree_spend(conn: &Conn, of: TreeOf<'_>) -> Result<TreeUsage> {
    let found = conn.opt(
        q!("usage_tree_of", tree_of_col),
        named! {":thread_id": of.thread_id, ":self_id": of.self_id, ":session_id": of.session_id},
        |r| {
            use tree_of_col as c;
            Ok(TreeUsage {
                root_session: r.get(c::ROOT_SESSION)?,
                threads: r.get(c::THREADS)?,
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
                session: Usage::at(
                    r,
                    [
                        c::SESSION_INPUT_TOKENS,
                        c::SESSION_OUTPUT_TOKENS,
                        c::SESSION_CACHE_READ_TOKENS,
                        c::SESSION_CACHE_WRITE_TOKENS,
                        c::SESSION_COST_USD,
                        c::SESSION_TURNS,
                        c::SESSION_TOOL_CALLS,
                    ],
                )?,
            })
        },
    )?;
    Ok(found.unwrap_or_else(|| TreeUsage {
        root_session: of.session_id.to_string(),
        threads: 0,
        usage: Usage::default(),
        session: Usage::default(),
    }))
}

/// Whether the database keeps root sessions' own turns (schema version 9 or later); the
/// read-only commands may open a database no newer serve has migrated yet.
pub fn has_session_usage(conn: &Conn) -> Result<bool> {
    Ok(conn.one(q!("session_usage_schema"), params![], |r| r.get::<i64>(0))? > 0)
}

columns! {
    /// Whose turns a row of `session_usage` counts (`{usage_session_row}`, before its
    /// `{usage_row}` in `sql/session_usage_all.sql`).
    pub mod session_col as "{usage_session_row}" {
        SESSION_ID = "session_id",
    }
}

/// Every root session's own turns (none on a database from before schema version 9).
pub fn all_sessions(conn: &Conn) -> Result<Vec<(String, Usage)>> {
    if !has_session_usage(conn)? {
        return Ok(Vec::new());
    }
    conn.all(q!("session_usage_all", session_col, col), params![], |r| {
        Ok((
            r.get(session_col::SESSION_ID)?,
            Usage::from_columns(r, session_col::COUNT)?,
        ))
    })
}

/// Records the cumulative usage of a root session's own turns (never lowering what the row
/// has). A session that is a thread's (`self_id`, or a thread whose id is `session_id`) is
/// not recorded: its turns are its thread's usage already. Returns whether it was recorded.
pub fn put_session(
    conn: &Conn,
    session_id: &SessionId,
    self_id: Option<&ThreadId>,
    u: &Usage,
    at: &str,
) -> Result<bool> {
    Ok(conn
        .opt(
            q!("session_usage_put"),
            named! {
                ":session_id": session_id,
                ":self_id": self_id,
                ":input": u.input_tokens,
                ":output": u.output_tokens,
                ":cache_read": u.cache_read_tokens,
                ":cache_write": u.cache_write_tokens,
                ":cost": u.cost_usd,
                ":turns": u.turns,
                ":tool_calls": u.tool_calls,
                ":at": at,
            },
            |r| r.get::<String>(0),
        )?
        .is_some())
}

/// The own usage of the threads `ids`, by position; a thread without
/// a row spent nothing.
pub fn of_threads(conn: &Conn, ids: &ThreadIds) -> Result<Vec<Usage>> {
    let mut out = vec![Usage::default(); ids.len()];
    conn.by_position(q!("usage_of_threads", batch_col, col), ids, &mut out, |r| {
        Usage::from_columns(r, batch_col::COUNT)
    })?;
    Ok(out)
}

columns! {
    /// Tokens and cost only (`{spend_row}` in `sql/usage_below_session.sql` and
    /// `sql/usage_told_of.sql`, which read `tree_usage` and `usage_told`), read by
    /// [`spend_columns`].
    pub mod spend_col as "{spend_row}" {
        INPUT_TOKENS = "input_tokens",
        OUTPUT_TOKENS = "output_tokens",
        CACHE_READ_TOKENS = "cache_read_tokens",
        CACHE_WRITE_TOKENS = "cache_write_tokens",
        COST_USD = "cost_usd",
    }
}

columns! {
    /// What a thread's subtree spent below the thread itself (`{usage_below_thread_row}` in
    /// `sql/usage_below_thread.sql`, which reads `subtree_usage s JOIN thread_usage u`), read
    /// by [`spend_at`].
    pub mod below_thread_col as "{usage_below_thread_row}" {
        INPUT_TOKENS = "s.input_tokens - u.input_tokens",
        OUTPUT_TOKENS = "s.output_tokens - u.output_tokens",
        CACHE_READ_TOKENS = "s.cache_read_tokens - u.cache_read_tokens",
        CACHE_WRITE_TOKENS = "s.cache_write_tokens - u.cache_write_tokens",
        COST_USD = "s.cost_usd - u.cost_usd",
    }
}

/// The [`spend_col`] row of `r`.
fn spend_columns(r: &Row<'_>) -> Result<Usage> {
    use spend_col as c;
    spend_at(
        r,
        [
            c::INPUT_TOKENS,
            c::OUTPUT_TOKENS,
            c::CACHE_READ_TOKENS,
            c::CACHE_WRITE_TOKENS,
            c::COST_USD,
        ],
    )
}

/// Tokens and cost only, in the columns at positions `at` of `r` (input, output, cache read
/// and cache write tokens, cost); negative differences (a float's rounding) count as zero.
fn spend_at(r: &Row<'_>, at: [usize; 5]) -> Result<Usage> {
    let [input, output, cache_read, cache_write, cost] = at;
    let n = |i: usize| -> Result<i64> { Ok(r.get::<Option<i64>>(i)?.unwrap_or(0).max(0)) };
    Ok(Usage {
        input_tokens: n(input)?,
        output_tokens: n(output)?,
        cache_read_tokens: n(cache_read)?,
        cache_write_tokens: n(cache_write)?,
        cost_usd: r.get::<Option<f64>>(cost)?.unwrap_or(0.0).max(0.0),
        turns: 0,
        tool_calls: 0,
    })
}

/// What `later` adds to `earlier`, field by field (never below zero; a cost difference under
/// a billionth of a dollar is a float's rounding, not spend).
pub fn spend_since(later: &Usage, earlier: &Usage) -> Usage {
    let cost = later.cost_usd - earlier.cost_usd;
    Usage {
        input_tokens: (later.input_tokens - earlier.input_tokens).max(0),
        output_tokens: (later.output_tokens - earlier.output_tokens).max(0),
        cache_read_tokens: (later.cache_read_tokens - earlier.cache_read_tokens).max(0),
        cache_write_tokens: (later.cache_write_tokens - earlier.cache_write_tokens).max(0),
        cost_usd: if cost > 1e-9 { cost } else { 0.0 },
        turns: 0,
        tool_calls: 0,
    }
}

/// The spend below a Pi session that its tool results report to it: when it is a managed
/// thread's session (its thread `self_id`, else the thread whose id is `session_id`: a
/// contract C worker), that thread's subtree without itself; else (a root session) every
/// thread of its tree.
pub fn spend_below(
    conn: &Conn,
    self_id: Option<&ThreadId>,
    session_id: &SessionId,
) -> Result<Usage> {
    let place = q!("usage_place", place_col);
    let mut me = None;
    for id in self_id
        .map(ThreadId::as_str)
        .into_iter()
        .chain([session_id.as_str()])
    {
        let placed = conn.opt(place, params![id], |r| {
            r.get::<String>(place_col::ROOT_SESSION)
        })?;
        if placed.is_some() {
            me = Some(id);
            break;
        }
    }
    let found = match me {
        Some(id) => conn.opt(
            q!("usage_below_thread", below_thread_col),
            params![id],
            |r| {
                use below_thread_col as c;
                spend_at(
                    r,
                    [
                        c::INPUT_TOKENS,
                        c::OUTPUT_TOKENS,
                        c::CACHE_READ_TOKENS,
                        c::CACHE_WRITE_TOKENS,
                        c::COST_USD,
                    ],
                )
            },
        )?,
        None => conn.opt(
            q!("usage_below_session", spend_col),
            params![session_id],
            spend_columns,
        )?,
    };
    Ok(found.unwrap_or_default())
}

/// The spend below `session_id` its tool results have not reported yet, and the spend below
/// (reads only: [`tell`] records it).
pub fn untold(
    conn: &Conn,
    self_id: Option<&ThreadId>,
    session_id: &SessionId,
) -> Result<(Usage, Usage)> {
    let below = spend_below(conn, self_id, session_id)?;
    let told = conn
        .opt(
            q!("usage_told_of", spend_col),
            params![session_id],
            spend_columns,
        )?
        .unwrap_or_default();
    Ok((spend_since(&below, &told), below))
}

/// Inside a write transaction: the spend below `session_id` (see [`spend_below`]) that its
/// tool results have not reported yet, and the `usage_told` row moved up to it, so the same
/// spend is never reported twice (not by repeated calls, concurrent ones, nor a new serve of
/// the same session). Zero when nothing new was spent.
pub fn tell(
    conn: &Conn,
    self_id: Option<&ThreadId>,
    session_id: &SessionId,
    at: &str,
) -> Result<Usage> {
    let (news, below) = untold(conn, self_id, session_id)?;
    if !news.is_zero() {
        conn.execute(
            q!("usage_told_put"),
            named! {
                ":session_id": session_id,
                ":input": below.input_tokens,
                ":output": below.output_tokens,
                ":cache_read": below.cache_read_tokens,
                ":cache_write": below.cache_write_tokens,
                ":cost": below.cost_usd,
                ":at": at,
            },
        )?;
    }
    Ok(news)
}

/// The completed assistant messages of a Pi session file from `since_ms` on (its messages
/// copied from elsewhere, as a fork or an inherited context, are older than the thread), in
/// file order.
pub fn session_messages(file: &crate::pi::session::SessionFile, since_ms: i64) -> Vec<Usage> {
    file.entries
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "assistant")
        .filter(|e| e["message"]["timestamp"].as_i64().unwrap_or(i64::MAX) >= since_ms)
        .map(|e| Usage::of_assistant_message(&e["message"]))
        .collect()
}

/// Counts the messages of `messages` (a thread's session file, see [`session_messages`]) that
/// its row has not counted yet: the row has counted the first `turns` of them, because the
/// ingest writer adds each message as Pi completes (and saves) it, in order. Returns what was
/// added. Run it only for a thread no live process writes for (the restore pass).
pub fn reconcile(conn: &Conn, thread_id: &ThreadId, messages: &[Usage], at: &str) -> Result<Usage> {
    let Some(counted) = of_thread(conn, thread_id)? else {
        return Ok(Usage::default());
    };
    let mut missing = Usage::default();
    for m in messages.iter().skip(counted.turns.max(0) as usize) {
        missing.add(m);
    }
    if missing.turns > 0 {
        add(conn, thread_id, &missing, at)?;
    }
    Ok(missing)
}

mod tree;
pub use tree::{place_col, place_of, tree_col, tree_row_col, tree_rows, trees, TreeRow};

#[cfg(test)]
mod tests;
