//! A request line's method and params as one typed [`Request`]: the method tables of the three
//! contracts ([`thread::ACTIONS`](super::thread::ACTIONS), [`agent::METHODS`](super::agent::METHODS),
//! [`worker::METHODS`](super::worker::METHODS)) route it, and the "unknown method" text lists
//! what they name, so a verb's name is spelled once.

use serde::Deserialize;
use serde_json::Value;

use super::agent::{self, AgentRequest};
use super::answer::{self, AnswerRequest};
use super::thread::{self, ThreadRequest};
use super::worker::{self, WorkerRequest};
use crate::error::{Error, ErrorCode, Result};

/// The method of contract A (its actions are in `params.action`).
pub const THREAD_METHOD: &str = "thread";
/// The extension's report of its own session's spend (not a model tool).
pub const SESSION_USAGE_METHOD: &str = "session_usage";
/// The extension's `/threads`: the state words of listed threads (not a model tool).
pub const THREAD_STATES_METHOD: &str = "thread.states";
/// The most ids one `thread.states` request may name.
pub const MAX_STATE_IDS: usize = 10_000;

/// One validated request to `serve`.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Thread(ThreadRequest),
    Agent(AgentRequest),
    Worker(WorkerRequest),
    SessionUsage(SessionUsage),
    /// `thread_answer` (with `THREADBASE_UI=parent`): a child's pending question answered.
    Answer(AnswerRequest),
    /// `thread.states {ids}`: each thread's state in words, as every surface spells it.
    ThreadStates(ThreadStates),
}

/// Every method `serve` answers, in the order its "unknown method" text lists them.
pub fn method_names() -> Vec<&'static str> {
    let mut names = vec![THREAD_METHOD];
    names.extend(agent::METHODS.iter().map(|m| m.name));
    names.extend(worker::METHODS.iter().map(|m| m.name));
    names.push(SESSION_USAGE_METHOD);
    names.push(answer::METHOD);
    names.push(THREAD_STATES_METHOD);
    names
}

/// Whether a request line is contract A's `start` (serve orders those by arrival), read
/// without validating it.
pub fn is_thread_start(method: &str, params: &Value) -> bool {
    method == THREAD_METHOD && params.get("action").and_then(Value::as_str) == Some("start")
}

/// Validates `params` of `method` into its request.
pub fn parse(method: &str, params: &Value) -> Result<Request> {
    if method == THREAD_METHOD {
        return thread::parse(params).map(Request::Thread);
    }
    if method == SESSION_USAGE_METHOD {
        return SessionUsage::parse(params).map(Request::SessionUsage);
    }
    if method == answer::METHOD {
        return answer::parse(params).map(Request::Answer);
    }
    if method == THREAD_STATES_METHOD {
        return ThreadStates::parse(params).map(Request::ThreadStates);
    }
    if let Some(m) = agent::method(method) {
        return agent::parse(m, params).map(Request::Agent);
    }
    if let Some(m) = worker::method(method) {
        return worker::parse(m, params).map(Request::Worker);
    }
    Err(Error::new(
        ErrorCode::InvalidParams,
        format!(
            "Unknown method: {}. Repair: use one of the methods this server offers: {}.",
            crate::paths::json_quote(method),
            method_names().join(", ")
        ),
    ))
}

/// `session_usage {input, output, cacheRead, cacheWrite, cost, turns, toolCalls}`: the
/// cumulative usage of this session's own turns, each a non-negative number.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionUsage {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
    pub cost: f64,
    pub turns: f64,
    pub tool_calls: f64,
}

impl SessionUsage {
    fn parse(params: &Value) -> Result<SessionUsage> {
        let p = SessionUsage::deserialize(params).map_err(|e| {
            Error::invalid(format!(
                "session_usage: {e}. Repair: send exactly {{\"input\", \"output\", \"cacheRead\", \"cacheWrite\", \"cost\", \"turns\", \"toolCalls\"}}: the session's cumulative usage."
            ))
        })?;
        for (name, x) in [
            ("input", p.input),
            ("output", p.output),
            ("cacheRead", p.cache_read),
            ("cacheWrite", p.cache_write),
            ("cost", p.cost),
            ("turns", p.turns),
            ("toolCalls", p.tool_calls),
        ] {
            amount(name, x)?;
        }
        Ok(p)
    }
}

/// `thread.states {ids}`: thread ids (as a list's snapshots carry them), at most
/// [`MAX_STATE_IDS`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadStates {
    pub ids: Vec<crate::domain::ThreadId>,
}

impl ThreadStates {
    fn parse(params: &Value) -> Result<ThreadStates> {
        let p = ThreadStates::deserialize(params).map_err(|e| {
            Error::invalid(format!(
                "thread.states: {e}. Repair: send exactly {{\"ids\": [\"thread_0123456789ab\", …]}}: the ids of the threads whose states you want."
            ))
        })?;
        if p.ids.len() > MAX_STATE_IDS {
            return Err(Error::invalid(format!(
                "thread.states takes at most {MAX_STATE_IDS} ids (got {}). Repair: ask for the ids in batches of {MAX_STATE_IDS}.",
                p.ids.len()
            )));
        }
        Ok(p)
    }
}

/// A count or amount as the row keeps it (not a number, negative or huge: refused).
fn amount(name: &str, x: f64) -> Result<f64> {
    if x.is_finite() && (0.0..=9_007_199_254_740_991.0).contains(&x) {
        Ok(x)
    } else {
        Err(Error::invalid(format!(
            "session_usage: {name} must be a non-negative number (got {x}). Repair: send the session's cumulative usage, e.g. {{\"input\": 1200, \"output\": 300, \"cacheRead\": 0, \"cacheWrite\": 0, \"cost\": 0.0123, \"turns\": 2, \"toolCalls\": 1}}."
        )))
    }
}
