//! Spend where the user looks (issue 28, item 2): what the Pi session of this serve is told of
//! its children's spend, and the root session's own turns.
//!
//! - **Told once.** Pi 1.6 adds a tool result's `usage` to the session's totals (its footer
//!   and `get_session_stats`, `AgentSession::getSessionStats`), and keeps it in the session
//!   file with the tool result. With `--report-usage` (the Pi extension asks for it), every
//!   answered request is preceded by a `usage` notification carrying the spend below this
//!   session (its tree's threads; for a managed child's session, its subtree) that no earlier
//!   one reported: [`store::usage::tell`] reads the difference and moves `usage_told` up in one
//!   write transaction, so repeated, concurrent and restarted serves of one session report
//!   each token once. The extension adds it to the tool result it returns.
//! - **The root session's own turns.** `session_usage` (a method) records the cumulative
//!   usage of this session's own turns, as its extension adds it up from the session's
//!   entries; only for a root session (a managed child's turns are its thread's usage). The
//!   budgets and `threadbase usage` count it as part of the tree.

use serde::Serialize;
use serde_json::Value;

use crate::contract::request::SessionUsage;
use crate::engine::Reply;
use crate::error::Result;
use crate::store::usage::{self, Usage};

/// A usage object as Pi 1.6 writes one (`Usage` of pi-ai): tokens, `totalTokens`, and the cost
/// split (threadbase knows only the total, so the parts are 0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PiUsage {
    pub input: i64,
    pub output: i64,
    pub cache_read: i64,
    pub cache_write: i64,
    pub total_tokens: i64,
    pub cost: PiCost,
}

/// `usage.cost`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PiCost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
    pub total: f64,
}

impl PiUsage {
    pub fn of(u: &Usage) -> PiUsage {
        PiUsage {
            input: u.input_tokens,
            output: u.output_tokens,
            cache_read: u.cache_read_tokens,
            cache_write: u.cache_write_tokens,
            total_tokens: u.total_tokens(),
            cost: PiCost {
                input: 0.0,
                output: 0.0,
                cache_read: 0.0,
                cache_write: 0.0,
                total: u.cost_usd,
            },
        }
    }
}

/// `usage` notification params: the request whose result carries it, and the spend.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageNotice<'a> {
    pub request_id: &'a Value,
    pub usage: PiUsage,
}

/// `session_usage`'s answer.
#[derive(Serialize)]
struct Recorded {
    recorded: bool,
}

/// The spend below this session not reported to it yet, now recorded as reported (zero:
/// nothing new). A read first, so a request with nothing new writes nothing.
pub(super) fn tell(e: &super::Engine) -> Result<Usage> {
    let self_id = e.cfg.self_id.as_ref();
    let session = &e.cfg.session_id;
    let (news, _) = usage::untold(&e.store.read()?, self_id, session)?;
    if news.is_zero() {
        return Ok(news);
    }
    let at = crate::time::now_iso();
    e.store.write(|tx| usage::tell(tx, self_id, session, &at))
}

/// `session_usage {input, output, cacheRead, cacheWrite, cost, turns, toolCalls}`: records
/// this (root) session's own turns; answers `{"recorded": bool}` (false for a managed
/// child's session, whose turns its thread's row counts).
pub(super) fn session_usage(e: &super::Engine, p: SessionUsage) -> Result<Reply> {
    let u = Usage {
        input_tokens: p.input as i64,
        output_tokens: p.output as i64,
        cache_read_tokens: p.cache_read as i64,
        cache_write_tokens: p.cache_write as i64,
        cost_usd: p.cost,
        turns: p.turns as i64,
        tool_calls: p.tool_calls as i64,
    };
    let at = crate::time::now_iso();
    let recorded = e
        .store
        .write(|tx| usage::put_session(tx, &e.cfg.session_id, e.cfg.self_id.as_ref(), &u, &at))?;
    Ok(Reply::of(Recorded { recorded }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tools whose results' usage a thread's spend leaves out are exactly the tools the
    /// extension forwards to serve.
    #[test]
    fn threadbase_tools_are_the_contracts_tools() {
        let mut tools: Vec<&str> = vec!["thread"];
        tools.extend(crate::contract::agent::tools());
        tools.extend(
            crate::contract::worker::METHODS
                .iter()
                .filter(|m| m.is_tool())
                .map(|m| m.name),
        );
        assert_eq!(tools, crate::pi::events::THREADBASE_TOOLS);
    }

    #[test]
    fn pi_usage_has_pis_keys_and_total() {
        let u = Usage {
            input_tokens: 100,
            output_tokens: 20,
            cache_read_tokens: 3,
            cache_write_tokens: 4,
            cost_usd: 0.5,
            turns: 2,
            tool_calls: 1,
        };
        assert_eq!(
            serde_json::to_value(PiUsage::of(&u)).unwrap(),
            serde_json::json!({"input": 100, "output": 20, "cacheRead": 3, "cacheWrite": 4,
                "totalTokens": 127, "cost": {"input": 0.0, "output": 0.0, "cacheRead": 0.0,
                "cacheWrite": 0.0, "total": 0.5}})
        );
    }
}
