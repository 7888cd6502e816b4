//! Spend caps on one root session's whole tree: `THREADBASE_BUDGET_TOKENS` (every token,
//! cache reads and writes included, as Pi's `totalTokens`) and `THREADBASE_BUDGET_USD` (Pi's
//! `cost.total`). Once the tree's spend reaches a cap, new work in it (start, fork, resume,
//! send, steer, spawn) is refused with `limit`; running children finish the turn they are in
//! and their spend is still recorded. The tree's spend is its threads' and the root session's
//! own turns' (`session_usage`, which the root's Pi extension reports). The check reads the
//! tree's running total (`tree_usage` and `session_usage`, one primary-key lookup each) inside
//! the transaction that reserves the work, and every serve of the tree (each child's own)
//! checks the same rows.

use crate::domain::ThreadId;
use crate::error::{Error, ErrorCode, Result};
use crate::store::budgets;
use crate::store::usage::{tree_spend, TreeOf, TreeUsage};
use crate::store::Conn;

pub const TOKENS_VAR: &str = "THREADBASE_BUDGET_TOKENS";
pub const USD_VAR: &str = "THREADBASE_BUDGET_USD";

/// The caps; `None` is no cap.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budget {
    pub tokens: Option<i64>,
    pub usd: Option<f64>,
}

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
        Ok(Budget { tokens, usd })
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
        if self.is_set() || kept.tree.is_some() {
            let spent = tree_spend(conn, of)?;
            self.check_spent(&spent, action)?;
            if let Some(k) = &kept.tree {
                if let Some((what, spend, cap)) = reached_caps(k.tokens, k.usd, &spent.usage) {
                    return Err(tree_refusal(k, &spent, what, &spend, &cap, action));
                }
            }
        }
        if let Some(k) = &kept.team {
            let team = budgets::team_spend(conn)?;
            if let Some((what, spend, cap)) = reached_caps(k.tokens, k.usd, &team.usage) {
                return Err(team_refusal(k, &team, what, &spend, &cap, action));
            }
        }
        Ok(())
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
                "Budget reached for the thread tree of session {}: {spend} spent of {var}={cap} ({} thread{} and the session's own turns; input {}, output {}, cache read {}, cache write {} tokens; {}). This {action} was refused; running threads finish the turn they are in. Repair: raise {var} (or unset it) in the environment Pi runs in and restart the session, or start a new tree in a new Pi session (its spend starts at zero); stopping or archiving threads does not lower what was spent (`threadbase usage` shows what each spent).",
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
            "Budget reached for the thread tree of session {}: {spend} spent of the database's tree budget of {cap} (`threadbase budget`, set {} on host {}; {} thread{} and the session's own turns; {}). This {action} was refused; running threads finish the turn they are in. Repair: raise it with `threadbase budget set --scope tree {what} N` (a cap left out of that command is removed), or remove it with `threadbase budget clear --scope tree`, or start a new tree in a new Pi session (its spend starts at zero); stopping or archiving threads does not lower what was spent (`threadbase usage` shows what each spent).",
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
            "Team budget reached: this database's spend across every host is {spend} of its team budget of {cap} (`threadbase budget`, set {} on host {}; {} tree{}, {} thread{} and the sessions' own turns; {}). This {action} was refused; running threads finish the turn they are in. Repair: raise it with `threadbase budget set --scope team {what} N` (a cap left out of that command is removed), or remove it with `threadbase budget clear --scope team`; stopping or archiving threads does not lower what was spent (`threadbase budget` shows it).",
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

impl super::Engine {
    /// Refuses `action` when this serve's tree (or `thread_id`'s, for work on an existing
    /// thread) has reached a cap. Contracts A and C: the tree is found from this serve's own
    /// thread and session.
    pub(super) fn check_budget(
        &self,
        conn: &Conn,
        thread_id: Option<&ThreadId>,
        action: &str,
    ) -> Result<()> {
        let of = TreeOf {
            thread_id,
            self_id: self.cfg.self_id.as_ref(),
            session_id: &self.cfg.session_id,
        };
        self.cfg.budget.check(conn, of, action)
    }
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
