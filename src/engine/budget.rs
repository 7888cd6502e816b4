//! Spend caps on one root session's whole tree: `THREADBASE_BUDGET_TOKENS` (every token,
//! cache reads and writes included, as Pi's `totalTokens`) and `THREADBASE_BUDGET_USD` (Pi's
//! `cost.total`). Once the tree's spend reaches a cap, new work in it (start, fork, resume,
//! send, steer, spawn) is refused with `limit`; running children are asked to wrap up past
//! `THREADBASE_BUDGET_WARN` and stopped at the cap (`engine/caps.rs`), and what they spend
//! meanwhile is still recorded. The tree's spend is its threads' and the root session's
//! own turns' (`session_usage`, which the root's Pi extension reports). The check reads the
//! tree's running total (`tree_usage` and `session_usage`, one primary-key lookup each) inside
//! the transaction that reserves the work, and every serve of the tree (each child's own)
//! checks the same rows.
//!
//! Issue 49 adds a cap per thread (`THREADBASE_THREAD_BUDGET_TOKENS`, `_USD`,
//! `THREADBASE_THREAD_MAX_TURNS`, and the database's scope `thread`), the warning fraction
//! `THREADBASE_BUDGET_WARN` and `THREADBASE_MAX_TREE_THREADS`. A resume or send of a thread at
//! its cap is refused here; a start past the tree's thread count too (read in the transaction
//! that reserves it, where the insert's trigger counts the new thread). What is done to running
//! threads (the wrap-up, the stop) is `engine/caps.rs`'.

use crate::domain::ThreadId;
use crate::error::{Error, ErrorCode, Result};
use crate::store::budgets;
use crate::store::usage::{tree_spend, TreeOf, TreeUsage};
use crate::store::Conn;

pub const TOKENS_VAR: &str = "THREADBASE_BUDGET_TOKENS";
pub const USD_VAR: &str = "THREADBASE_BUDGET_USD";
pub const THREAD_TOKENS_VAR: &str = "THREADBASE_THREAD_BUDGET_TOKENS";
pub const THREAD_USD_VAR: &str = "THREADBASE_THREAD_BUDGET_USD";
pub const THREAD_TURNS_VAR: &str = "THREADBASE_THREAD_MAX_TURNS";
pub const WARN_VAR: &str = "THREADBASE_BUDGET_WARN";
pub const MAX_TREE_THREADS_VAR: &str = "THREADBASE_MAX_TREE_THREADS";

/// The warning fraction when `THREADBASE_BUDGET_WARN` is unset.
pub const DEFAULT_WARN: f64 = 0.8;

/// The caps on each thread (the environment's, or the database's scope `thread`); `None` is
/// no cap.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadCaps {
    pub tokens: Option<i64>,
    pub usd: Option<f64>,
    pub turns: Option<i64>,
}

impl ThreadCaps {
    pub fn is_set(&self) -> bool {
        self.tokens.is_some() || self.usd.is_some() || self.turns.is_some()
    }

    /// The environment's caps as `VAR=value`, for the views.
    pub fn named_env(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(t) = self.tokens {
            out.push((THREAD_TOKENS_VAR, thousands(t)));
        }
        if let Some(u) = self.usd {
            out.push((THREAD_USD_VAR, usd(u)));
        }
        if let Some(t) = self.turns {
            out.push((THREAD_TURNS_VAR, thousands(t)));
        }
        out
    }
}

/// The caps; `None` is no cap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// The caps on a root session's whole tree.
    pub tokens: Option<i64>,
    pub usd: Option<f64>,
    /// The caps on each thread (issue 49).
    pub thread: ThreadCaps,
    /// The fraction of a cap past which a running thread is asked to wrap up.
    pub warn: f64,
    /// How many threads a root session's tree may ever start.
    pub max_tree_threads: Option<i64>,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget {
            tokens: None,
            usd: None,
            thread: ThreadCaps::default(),
            warn: DEFAULT_WARN,
            max_tree_threads: None,
        }
    }
}

/// The verbs that start a thread (and so count against `THREADBASE_MAX_TREE_THREADS`); the
/// others act on an existing thread.
const STARTS: [&str; 4] = ["start", "fork", "threads_spawn", "agent_spawn"];

impl Budget {
    /// Reads the caps. An unset or empty variable is no cap; a value that is not a cap is an
    /// error (a cap silently ignored would let a tree spend without limit).
    pub fn from_env(get: &dyn Fn(&str) -> Option<String>) -> Result<Budget> {
        let tokens = match get(TOKENS_VAR).filter(|v| !v.trim().is_empty()) {
            None => None,
            Some(raw) => Some(parse_tokens(&raw).ok_or_else(|| {
                Error::invalid(format!(
                    "{TOKENS_VAR} must be a whole number of tokens, such as 2000000 (got {}). Repair: set it to a number of tokens, or unset it for no token cap.",
                    crate::paths::json_quote(&raw)
                ))
            })?),
        };
        let usd = match get(USD_VAR).filter(|v| !v.trim().is_empty()) {
            None => None,
            Some(raw) => Some(parse_usd(&raw).ok_or_else(|| {
                Error::invalid(format!(
                    "{USD_VAR} must be a non-negative amount of US dollars, such as 5 or 2.50 (got {}). Repair: set it to an amount, or unset it for no cost cap.",
                    crate::paths::json_quote(&raw)
                ))
            })?),
        };
        let count = |var: &str, what: &str, min: i64| -> Result<Option<i64>> {
            match get(var).filter(|v| !v.trim().is_empty()) {
                None => Ok(None),
                Some(raw) => match parse_tokens(&raw).filter(|n| *n >= min) {
                    Some(n) => Ok(Some(n)),
                    None => Err(Error::invalid(format!(
                        "{var} must be a whole number of {what}{}, such as 20 (got {}). Repair: set it to a number of {what}, or unset it for no such cap.",
                        if min > 0 { " above 0" } else { "" },
                        crate::paths::json_quote(&raw)
                    ))),
                },
            }
        };
        let thread_usd = match get(THREAD_USD_VAR).filter(|v| !v.trim().is_empty()) {
            None => None,
            Some(raw) => Some(parse_usd(&raw).ok_or_else(|| {
                Error::invalid(format!(
                    "{THREAD_USD_VAR} must be a non-negative amount of US dollars, such as 0.50 (got {}). Repair: set it to an amount, or unset it for no cost cap per thread.",
                    crate::paths::json_quote(&raw)
                ))
            })?),
        };
        let warn = match get(WARN_VAR).filter(|v| !v.trim().is_empty()) {
            None => DEFAULT_WARN,
            Some(raw) => parse_fraction(&raw).ok_or_else(|| {
                Error::invalid(format!(
                    "{WARN_VAR} must be a fraction above 0 and at most 1, such as 0.8 (got {}). Repair: set it to the share of a cap at which a thread is asked to wrap up, or unset it for 0.8.",
                    crate::paths::json_quote(&raw)
                ))
            })?,
        };
        Ok(Budget {
            tokens,
            usd,
            thread: ThreadCaps {
                tokens: count(THREAD_TOKENS_VAR, "tokens", 0)?,
                usd: thread_usd,
                turns: count(THREAD_TURNS_VAR, "turns", 1)?,
            },
            warn,
            max_tree_threads: count(MAX_TREE_THREADS_VAR, "threads", 1)?,
        })
    }

    pub fn is_set(&self) -> bool {
        self.tokens.is_some() || self.usd.is_some()
    }

    /// The cap `spent` has reached, if any, as (variable, spend text, cap text).
    pub fn reached(&self, spent: &TreeUsage) -> Option<(&'static str, String, String)> {
        let u = &spent.usage;
        if let Some(cap) = self.tokens.filter(|cap| u.total_tokens() >= *cap) {
            return Some((
                TOKENS_VAR,
                format!("{} tokens", thousands(u.total_tokens())),
                thousands(cap),
            ));
        }
        if let Some(cap) = self.usd.filter(|cap| u.cost_usd >= *cap) {
            return Some((USD_VAR, usd(u.cost_usd), usd(cap)));
        }
        None
    }

    /// Refuses `action` (e.g. "start") when a cap is reached: this one (the environment's) or
    /// the database's (`threadbase budget`, V15) on the tree `of` belongs to, or the database's
    /// team cap on the whole database's spend. Read in the caller's transaction (the one that
    /// reserves the work): one query for the database's caps, then the tree's spend (one
    /// lookup) when a tree cap is set, and the team's (sums over a row per root session) when
    /// a team cap is.
    pub fn check(&self, conn: &Conn, of: TreeOf<'_>, action: &str) -> Result<()> {
        let kept = budgets::read(conn)?;
        let start = STARTS.contains(&action);
        if let (Some(id), false) = (of.thread_id, start) {
            self.check_thread(conn, &kept, id, action)?;
        }
        let count_threads = start && self.max_tree_threads.is_some();
        if self.is_set() || kept.tree.is_some() || count_threads {
            let spent = tree_spend(conn, of)?;
            if let Some(max) = self
                .max_tree_threads
                .filter(|m| start && spent.threads >= *m)
            {
                return Err(Error::new(
                    ErrorCode::Limit,
                    format!(
                        "Thread limit reached for the tree of session {}: it has started {} thread{} of {MAX_TREE_THREADS_VAR}={} (every serve of the tree counts, closed and archived threads too). This {action} was refused. Repair: reuse a thread (send to or resume one that exists), raise {MAX_TREE_THREADS_VAR} (or unset it) in the environment Pi runs in and restart the session, or start a new tree in a new Pi session.",
                        spent.root_session,
                        thousands(spent.threads),
                        if spent.threads == 1 { "" } else { "s" },
                        thousands(max),
                    ),
                ));
            }
            self.check_spent(&spent, action)?;
            if let Some(k) = &kept.tree {
                if let Some((what, spend, cap)) = reached_caps(k.tokens, k.usd, &spent.usage) {
                    return Err(tree_refusal(k, &spent, what, &spend, &cap, action));
                }
            }
        }
        if let Some(k) = &kept.team {
            // Starts of every tree check the team's spend: on PostgreSQL they take turns here,
            // and only while a team budget is set.
            conn.lock(crate::store::Lock::TeamBudget)?;
            let team = budgets::team_spend(conn)?;
            if let Some((what, spend, cap)) = reached_caps(k.tokens, k.usd, &team.usage) {
                return Err(team_refusal(k, &team, what, &spend, &cap, action));
            }
        }
        Ok(())
    }

    /// Refuses `action` on thread `id` when it reached a cap of its own (issue 49).
    fn check_thread(
        &self,
        conn: &Conn,
        kept: &budgets::Kepts,
        id: &ThreadId,
        action: &str,
    ) -> Result<()> {
        let caps = thread_caps(self, kept);
        if caps.is_empty() {
            return Ok(());
        }
        let used = crate::store::usage::of_thread(conn, id)?.unwrap_or_default();
        let Some(hit) = caps
            .iter()
            .map(|c| c.using(&used))
            .find(|u| u.fraction() >= 1.0)
        else {
            return Ok(());
        };
        Err(Error::new(
            ErrorCode::Limit,
            format!(
                "Thread {id} is at its cap: it used {} ({}). This {action} was refused. Repair: {}",
                hit.used_text(),
                hit.cap.name(),
                hit.cap.repair()
            ),
        ))
    }

    /// Refuses `action` when `spent` reached one of this budget's (the environment's) caps.
    fn check_spent(&self, spent: &TreeUsage, action: &str) -> Result<()> {
        let Some((var, spend, cap)) = self.reached(spent) else {
            return Ok(());
        };
        let u = &spent.usage;
        Err(Error::new(
            ErrorCode::Limit,
            format!(
                "Budget reached for the thread tree of session {}: {spend} spent of {var}={cap} ({} thread{} and the session's own turns; input {}, output {}, cache read {}, cache write {} tokens; {}). This {action} was refused; running threads of it are asked to wrap up and stopped at the cap. Repair: raise {var} (or unset it) in the environment Pi runs in and restart the session, or start a new tree in a new Pi session (its spend starts at zero); stopping or archiving threads does not lower what was spent (`threadbase usage` shows what each spent).",
                spent.root_session,
                spent.threads,
                if spent.threads == 1 { "" } else { "s" },
                thousands(u.input_tokens),
                thousands(u.output_tokens),
                thousands(u.cache_read_tokens),
                thousands(u.cache_write_tokens),
                usd(u.cost_usd),
            ),
        ))
    }
}

/// A whole number of tokens (`2000000`, `2_000_000`, `2,000,000`), or `None`.
pub fn parse_tokens(raw: &str) -> Option<i64> {
    let digits: String = raw
        .trim()
        .chars()
        .filter(|c| !matches!(c, '_' | ','))
        .collect();
    match digits.parse::<i64>() {
        Ok(n) if n >= 0 && digits.bytes().all(|b| b.is_ascii_digit()) => Some(n),
        _ => None,
    }
}

/// A whole number of turns above 0, or `None`.
pub fn parse_turns(raw: &str) -> Option<i64> {
    parse_tokens(raw).filter(|n| *n > 0)
}

/// A fraction above 0 and at most 1 (`0.8`), or `None`.
pub fn parse_fraction(raw: &str) -> Option<f64> {
    match raw.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 && x <= 1.0 => Some(x),
        _ => None,
    }
}

/// What a cap counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapKind {
    Tokens,
    Usd,
    Turns,
}

/// Whose spend a cap bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CapScope {
    Thread,
    Tree,
    Team,
}

impl CapScope {
    pub fn as_str(self) -> &'static str {
        match self {
            CapScope::Thread => "thread",
            CapScope::Tree => "tree",
            CapScope::Team => "team",
        }
    }
}

/// One cap that applies to a thread: its scope, what it counts, its value and where it was
/// set (an environment variable, or the database's row of its scope).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cap {
    pub scope: CapScope,
    pub kind: CapKind,
    pub value: f64,
    /// The variable that set it; `None`: the database's `budgets` row.
    pub var: Option<&'static str>,
}

impl Cap {
    fn amount(&self, x: f64) -> String {
        match self.kind {
            CapKind::Tokens => format!("{} tokens", thousands(x as i64)),
            CapKind::Usd => usd(x),
            CapKind::Turns => {
                let n = x as i64;
                format!("{} turn{}", thousands(n), if n == 1 { "" } else { "s" })
            }
        }
    }

    /// `the thread cap THREADBASE_THREAD_BUDGET_TOKENS=1,000` or `the database's thread budget
    /// of 1,000 tokens`.
    pub fn name(&self) -> String {
        match self.var {
            Some(var) => format!(
                "the {} cap {var}={}",
                self.scope.as_str(),
                match self.kind {
                    CapKind::Usd => usd(self.value),
                    _ => thousands(self.value as i64),
                }
            ),
            None => format!(
                "the database's {} budget of {}",
                self.scope.as_str(),
                self.amount(self.value)
            ),
        }
    }

    /// How to raise it.
    pub fn repair(&self) -> String {
        let flag = match self.kind {
            CapKind::Tokens => "--tokens N",
            CapKind::Usd => "--usd DOLLARS",
            CapKind::Turns => "--turns N",
        };
        match self.var {
            Some(var) => format!(
                "raise {var} (or unset it) in the environment Pi runs in and restart the session{}.",
                if self.scope == CapScope::Thread {
                    ", or start a new thread (its spend starts at zero)"
                } else {
                    ""
                }
            ),
            None => format!(
                "raise it with `threadbase budget set --scope {} {flag}` (a cap left out of that command is removed), or remove it with `threadbase budget clear --scope {}`.",
                self.scope.as_str(),
                self.scope.as_str()
            ),
        }
    }

    /// How much of this cap `u` used.
    pub fn using(&self, u: &crate::store::usage::Usage) -> CapUse {
        let used = match self.kind {
            CapKind::Tokens => u.total_tokens() as f64,
            CapKind::Usd => u.cost_usd,
            CapKind::Turns => u.turns as f64,
        };
        CapUse { cap: *self, used }
    }
}

/// A cap and how much of it was used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapUse {
    pub cap: Cap,
    pub used: f64,
}

impl CapUse {
    /// The share used; a cap of 0 is reached at once.
    pub fn fraction(&self) -> f64 {
        if self.cap.value <= 0.0 {
            1.0
        } else {
            self.used / self.cap.value
        }
    }

    /// `850 tokens of 1,000 (85%)`.
    pub fn used_text(&self) -> String {
        format!(
            "{} of {} ({:.0}%)",
            self.cap.amount(self.used),
            self.cap.amount(self.cap.value),
            (self.fraction() * 100.0).floor()
        )
    }
}

/// The smaller of two caps (`None`: no cap).
fn lower<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y < x { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The caps on each thread: per kind, the smaller of the environment's and the database's
/// (a tie names the variable).
pub fn thread_caps(b: &Budget, kept: &budgets::Kepts) -> Vec<Cap> {
    let k = kept.thread.as_ref();
    let pick = |kind: CapKind, env: Option<f64>, db: Option<f64>, var: &'static str| {
        lower(env, db).map(|value| Cap {
            scope: CapScope::Thread,
            kind,
            value,
            var: (env == Some(value)).then_some(var),
        })
    };
    [
        pick(
            CapKind::Tokens,
            b.thread.tokens.map(|t| t as f64),
            k.and_then(|k| k.tokens).map(|t| t as f64),
            THREAD_TOKENS_VAR,
        ),
        pick(
            CapKind::Usd,
            b.thread.usd,
            k.and_then(|k| k.usd),
            THREAD_USD_VAR,
        ),
        pick(
            CapKind::Turns,
            b.thread.turns.map(|t| t as f64),
            k.and_then(|k| k.turns).map(|t| t as f64),
            THREAD_TURNS_VAR,
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The caps on a whole tree (the environment's and the database's scope `tree`, the smaller
/// per kind) and on the team (the database's scope `team`).
pub fn tree_and_team_caps(b: &Budget, kept: &budgets::Kepts) -> (Vec<Cap>, Vec<Cap>) {
    let k = kept.tree.as_ref();
    let pick = |kind: CapKind, env: Option<f64>, db: Option<f64>, var: &'static str| {
        lower(env, db).map(|value| Cap {
            scope: CapScope::Tree,
            kind,
            value,
            var: (env == Some(value)).then_some(var),
        })
    };
    let tree = [
        pick(
            CapKind::Tokens,
            b.tokens.map(|t| t as f64),
            k.and_then(|k| k.tokens).map(|t| t as f64),
            TOKENS_VAR,
        ),
        pick(CapKind::Usd, b.usd, k.and_then(|k| k.usd), USD_VAR),
    ]
    .into_iter()
    .flatten()
    .collect();
    let team = kept
        .team
        .iter()
        .flat_map(|k| {
            [
                k.tokens.map(|t| Cap {
                    scope: CapScope::Team,
                    kind: CapKind::Tokens,
                    value: t as f64,
                    var: None,
                }),
                k.usd.map(|u| Cap {
                    scope: CapScope::Team,
                    kind: CapKind::Usd,
                    value: u,
                    var: None,
                }),
            ]
        })
        .flatten()
        .collect();
    (tree, team)
}

/// A non-negative amount of US dollars (`5`, `2.50`, `$2.50`), or `None`.
pub fn parse_usd(raw: &str) -> Option<f64> {
    let text = raw.trim();
    let text = text.strip_prefix('$').unwrap_or(text);
    match text.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Some(x),
        _ => None,
    }
}

/// Which of the caps `tokens` and `usd` `u` has reached, as (what, spend text, cap text).
fn reached_caps(
    tokens: Option<i64>,
    usd_cap: Option<f64>,
    u: &crate::store::usage::Usage,
) -> Option<(&'static str, String, String)> {
    if let Some(cap) = tokens.filter(|cap| u.total_tokens() >= *cap) {
        return Some((
            "--tokens",
            format!("{} tokens", thousands(u.total_tokens())),
            format!("{} tokens", thousands(cap)),
        ));
    }
    if let Some(cap) = usd_cap.filter(|cap| u.cost_usd >= *cap) {
        return Some(("--usd", usd(u.cost_usd), usd(cap)));
    }
    None
}

/// How much of each kind of token, and the cost: `input 1,000, output 250, cache read 0,
/// cache write 0 tokens; $0.0100`.
fn breakdown(u: &crate::store::usage::Usage) -> String {
    format!(
        "input {}, output {}, cache read {}, cache write {} tokens; {}",
        thousands(u.input_tokens),
        thousands(u.output_tokens),
        thousands(u.cache_read_tokens),
        thousands(u.cache_write_tokens),
        usd(u.cost_usd),
    )
}

/// The refusal when a tree reached the database's tree cap.
fn tree_refusal(
    k: &budgets::Kept,
    spent: &TreeUsage,
    what: &str,
    spend: &str,
    cap: &str,
    action: &str,
) -> Error {
    Error::new(
        ErrorCode::Limit,
        format!(
            "Budget reached for the thread tree of session {}: {spend} spent of the database's tree budget of {cap} (`threadbase budget`, set {} on host {}; {} thread{} and the session's own turns; {}). This {action} was refused; running threads of it are asked to wrap up and stopped at the cap. Repair: raise it with `threadbase budget set --scope tree {what} N` (a cap left out of that command is removed), or remove it with `threadbase budget clear --scope tree`, or start a new tree in a new Pi session (its spend starts at zero); stopping or archiving threads does not lower what was spent (`threadbase usage` shows what each spent).",
            spent.root_session,
            k.set_at,
            k.set_by,
            spent.threads,
            if spent.threads == 1 { "" } else { "s" },
            breakdown(&spent.usage),
        ),
    )
}

/// The refusal when the whole database reached the team cap.
fn team_refusal(
    k: &budgets::Kept,
    team: &budgets::TeamSpend,
    what: &str,
    spend: &str,
    cap: &str,
    action: &str,
) -> Error {
    Error::new(
        ErrorCode::Limit,
        format!(
            "Team budget reached: this database's spend across every host is {spend} of its team budget of {cap} (`threadbase budget`, set {} on host {}; {} tree{}, {} thread{} and the sessions' own turns; {}). This {action} was refused; running threads of it are asked to wrap up and stopped at the cap. Repair: raise it with `threadbase budget set --scope team {what} N` (a cap left out of that command is removed), or remove it with `threadbase budget clear --scope team`; stopping or archiving threads does not lower what was spent (`threadbase budget` shows it).",
            k.set_at,
            k.set_by,
            team.trees,
            if team.trees == 1 { "" } else { "s" },
            team.threads,
            if team.threads == 1 { "" } else { "s" },
            breakdown(&team.usage),
        ),
    )
}

/// Refuses `action` when this serve's tree (or `thread_id`'s, for work on an existing
/// thread) has reached a cap. Contracts A and C: the tree is found from this serve's own
/// thread and session.
pub(super) fn check_budget(
    e: &super::Engine,
    conn: &Conn,
    thread_id: Option<&ThreadId>,
    action: &str,
) -> Result<()> {
    let of = TreeOf {
        thread_id,
        self_id: e.cfg.self_id.as_ref(),
        session_id: &e.cfg.session_id,
    };
    e.cfg.budget.check(conn, of, action)
}

pub use crate::text::thousands;

/// Dollars with four decimals: `$0.0123`.
pub fn usd(x: f64) -> String {
    format!("${x:.4}")
}

/// `1,234 tokens (input 900 · output 300 · cache read 34 · cache write 0) · $0.0123 · 4 turns
/// · 2 tool calls`.
pub fn summary(u: &crate::store::usage::Usage) -> String {
    format!(
        "{} tokens (input {} · output {} · cache read {} · cache write {}) · {} · {} turn{} · {} tool call{}",
        thousands(u.total_tokens()),
        thousands(u.input_tokens),
        thousands(u.output_tokens),
        thousands(u.cache_read_tokens),
        thousands(u.cache_write_tokens),
        usd(u.cost_usd),
        thousands(u.turns),
        if u.turns == 1 { "" } else { "s" },
        thousands(u.tool_calls),
        if u.tool_calls == 1 { "" } else { "s" },
    )
}

/// The budget line of a tree, as `threadbase usage` and the web view print it.
pub fn budget_text(b: &Budget, total: &crate::store::usage::TreeUsage) -> String {
    budget_text_of(b, total, Some((TOKENS_VAR, USD_VAR)))
}

/// [`budget_text`], naming the caps' variables when `vars` gives them (the environment's
/// caps), not when they come from the database (`threadbase budget`).
pub fn budget_text_of(
    b: &Budget,
    total: &crate::store::usage::TreeUsage,
    vars: Option<(&str, &str)>,
) -> String {
    let named = |var: &str| vars.map(|_| format!(" ({var})")).unwrap_or_default();
    let mut parts = Vec::new();
    if let Some(cap) = b.tokens {
        parts.push(format!(
            "{} of {} tokens{}",
            thousands(total.usage.total_tokens()),
            thousands(cap),
            named(vars.map_or("", |v| v.0))
        ));
    }
    if let Some(cap) = b.usd {
        parts.push(format!(
            "{} of {}{}",
            usd(total.usage.cost_usd),
            usd(cap),
            named(vars.map_or("", |v| v.1))
        ));
    }
    let mut s = parts.join(" · ");
    if b.reached(total).is_some() {
        s.push_str(" · REACHED: new work in this tree is refused");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::usage::Usage;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn caps_parse_strictly() {
        assert_eq!(Budget::from_env(&env(&[])).unwrap(), Budget::default());
        let b = Budget::from_env(&env(&[(TOKENS_VAR, " 2_000,000 "), (USD_VAR, "$2.50")])).unwrap();
        assert_eq!(b.tokens, Some(2_000_000));
        assert_eq!(b.usd, Some(2.5));
        assert_eq!(
            Budget::from_env(&env(&[(TOKENS_VAR, "")])).unwrap(),
            Budget::default()
        );
        for (var, bad) in [
            (TOKENS_VAR, "10k"),
            (TOKENS_VAR, "-5"),
            (TOKENS_VAR, "1.5"),
            (USD_VAR, "five"),
            (USD_VAR, "-1"),
            (USD_VAR, "inf"),
        ] {
            let e = Budget::from_env(&env(&[(var, bad)])).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidParams, "{var}={bad}");
            assert!(
                e.message.contains(var) && e.message.contains("Repair:"),
                "{}",
                e.message
            );
        }
    }

    /// A `send` (or `resume`) to a thread at its own cap is refused with `limit` and how to
    /// raise the cap (issue 49); under its cap, and for a start, nothing is refused.
    #[test]
    fn a_send_to_a_thread_at_its_cap_is_refused_with_how_to_raise_it() {
        use crate::domain::{Contract, Phase, SessionId, ThreadId, ThreadStatus};
        use crate::store::threads::{insert_thread, upsert_manager, ManagerSpec, NewThread};
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path().join("t.sqlite")).unwrap();
        let session = SessionId::new("s");
        let id = ThreadId::new("thread_capped");
        store
            .write(|tx| {
                let m = upsert_manager(tx, &ManagerSpec::new(&session, Contract::Thread, "/root"))?;
                insert_thread(
                    tx,
                    &NewThread {
                        id: id.clone(),
                        manager_id: m,
                        path: "/root/capped".into(),
                        parent_path: Some("/root".into()),
                        task_name: "capped".into(),
                        name: "capped".into(),
                        depth: 1,
                        cwd: "/w".into(),
                        status: ThreadStatus::Live,
                        phase: Phase::Idle,
                        ..Default::default()
                    },
                )?;
                crate::store::usage::add(
                    tx,
                    &id,
                    &Usage {
                        input_tokens: 900,
                        ..Usage::default()
                    },
                    "2026-12-06T00:00:00.000Z",
                )
            })
            .unwrap();
        let of = TreeOf {
            thread_id: Some(&id),
            self_id: None,
            session_id: &session,
        };
        let capped = |tokens: i64| Budget {
            thread: ThreadCaps {
                tokens: Some(tokens),
                ..ThreadCaps::default()
            },
            ..Budget::default()
        };
        let conn = store.read().unwrap();
        let e = capped(900).check(&conn, of, "send").unwrap_err();
        assert_eq!(e.code, ErrorCode::Limit, "{}", e.message);
        assert!(
            e.message.contains("This send was refused")
                && e.message.contains("Repair:")
                && e.message.contains(THREAD_TOKENS_VAR),
            "{}",
            e.message
        );
        assert!(capped(901).check(&conn, of, "send").is_ok());
        assert!(capped(100)
            .check(
                &conn,
                TreeOf {
                    thread_id: None,
                    ..of
                },
                "start"
            )
            .is_ok());
    }

    #[test]
    fn a_cap_is_reached_at_equality() {
        let spent = |tokens: i64, cost: f64| TreeUsage {
            root_session: "s".into(),
            threads: 1,
            usage: Usage {
                input_tokens: tokens,
                cost_usd: cost,
                ..Usage::default()
            },
            session: Usage::default(),
        };
        let b = Budget {
            tokens: Some(100),
            usd: Some(1.0),
            ..Budget::default()
        };
        assert!(b.reached(&spent(99, 0.99)).is_none());
        assert_eq!(b.reached(&spent(100, 0.0)).unwrap().0, TOKENS_VAR);
        assert_eq!(b.reached(&spent(5, 1.0)).unwrap().0, USD_VAR);
        assert!(Budget::default().reached(&spent(1 << 40, 1e9)).is_none());
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(12), "12");
        assert_eq!(usd(0.01234), "$0.0123");
    }
}
