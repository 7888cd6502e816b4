//! Budgets kept in the database (V15, issue 33): caps that hold for every serve of every host
//! sharing it, read by the budget check inside the transaction that reserves the work
//! (`engine/budget.rs`), set by `threadbase budget`. Scope `tree` caps each root session's
//! whole tree, as `THREADBASE_BUDGET_TOKENS` / `_USD` do; scope `team` caps the whole
//! database's spend; scope `thread` (V18, issue 49) caps each thread, as
//! `THREADBASE_THREAD_BUDGET_*` do, and may cap its turns too.

use serde::Serialize;

use crate::error::Result;
use crate::store::db::{params, q, Row};
use crate::store::rows::columns;
use crate::store::usage::Usage;
use crate::store::Conn;

/// What a budget caps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Each root session's whole tree.
    Tree,
    /// The whole database: every tree of every host.
    Team,
    /// Each thread of the database (V18).
    Thread,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Tree => "tree",
            Scope::Team => "team",
            Scope::Thread => "thread",
        }
    }

    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "tree" => Some(Scope::Tree),
            "team" => Some(Scope::Team),
            "thread" => Some(Scope::Thread),
            _ => None,
        }
    }
}

columns! {
    /// A budget row (`{budget_row}` in `sql/budgets_all.sql`, which reads `budgets`): what
    /// [`Kept`] holds.
    pub mod budget_col as "{budget_row}" {
        SCOPE = "scope",
        TOKENS = "tokens",
        USD = "usd",
        TURNS = "turns",
        SET_AT = "set_at",
        SET_BY = "set_by",
    }
}

/// A scope's caps as the database keeps them; at least one is set.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Kept {
    pub scope: Scope,
    pub tokens: Option<i64>,
    pub usd: Option<f64>,
    /// A cap on a thread's turns (scope `thread` only; V18).
    pub turns: Option<i64>,
    /// When, and from which host, it was set.
    pub set_at: String,
    pub set_by: String,
}

/// The budgets the database keeps, by scope.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Kepts {
    pub tree: Option<Kept>,
    pub team: Option<Kept>,
    pub thread: Option<Kept>,
}

/// Whether the database keeps budgets (V15); the read-only commands open older ones as they
/// are.
pub fn has_table(conn: &Conn) -> Result<bool> {
    Ok(conn.one(q!("budgets_schema"), params![], |r| r.get::<i64>(0))? > 0)
}

/// The database's budgets: one query (at most two rows).
pub fn read(conn: &Conn) -> Result<Kepts> {
    let mut out = Kepts::default();
    for kept in conn.all(q!("budgets_all", budget_col), params![], read_row)? {
        match kept.scope {
            Scope::Tree => out.tree = Some(kept),
            Scope::Team => out.team = Some(kept),
            Scope::Thread => out.thread = Some(kept),
        }
    }
    Ok(out)
}

fn read_row(r: &Row<'_>) -> Result<Kept> {
    let scope: String = r.get(budget_col::SCOPE)?;
    Ok(Kept {
        // The column's CHECK admits these three words only.
        scope: Scope::parse(&scope).unwrap_or(Scope::Team),
        tokens: r.get(budget_col::TOKENS)?,
        usd: r.get(budget_col::USD)?,
        turns: r.get(budget_col::TURNS)?,
        set_at: r.get(budget_col::SET_AT)?,
        set_by: r.get(budget_col::SET_BY)?,
    })
}

/// A scope's caps as `budget set` gives them (at least one).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Caps {
    pub tokens: Option<i64>,
    pub usd: Option<f64>,
    /// Scope `thread` only.
    pub turns: Option<i64>,
}

/// Sets `scope`'s caps (at least one), replacing what was set.
pub fn put(conn: &Conn, scope: Scope, caps: Caps, at: &str, by: &str) -> Result<()> {
    conn.execute(
        q!("budget_put"),
        params![scope.as_str(), caps.tokens, caps.usd, at, by, caps.turns],
    )?;
    Ok(())
}

/// Removes `scope`'s caps; whether it had any.
pub fn clear(conn: &Conn, scope: Scope) -> Result<bool> {
    Ok(conn.execute(q!("budget_clear"), params![scope.as_str()])? > 0)
}

/// The whole database's spend: every tree's threads and every session's own turns.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TeamSpend {
    /// Root sessions (trees) that spent or hold threads.
    pub trees: i64,
    pub threads: i64,
    #[serde(flatten)]
    pub usage: Usage,
}

/// The whole database's spend (`sql/team_spend.sql`: sums over one row per root session).
pub fn team_spend(conn: &Conn) -> Result<TeamSpend> {
    conn.one(q!("team_spend"), params![], |r| {
        Ok(TeamSpend {
            threads: r.get(0)?,
            usage: Usage {
                input_tokens: r.get(1)?,
                output_tokens: r.get(2)?,
                cache_read_tokens: r.get(3)?,
                cache_write_tokens: r.get(4)?,
                cost_usd: r.get(5)?,
                turns: r.get(7)?,
                tool_calls: r.get(8)?,
            },
            trees: r.get(6)?,
        })
    })
}
