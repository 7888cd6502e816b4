//! `/api/timeline?root=R` (issue 50): a picture of one tree over time, from the rows already
//! stored. One bar per thread (the first [`MAX_TIMELINE`] in tree order) from its row's
//! creation to its close (or now), cut into spans of what it was doing, read from its events:
//! `queued` until it launched, `busy` from a turn's start to its end, `idle` between turns,
//! `asking` from a question to the next sign of work, `stopped` from a stop request to the
//! close, `failed` after an error; a live thread's last span is what its row says now (phase
//! and `thread_attention`'s word), so the bar changes colour as the thread does. Each turn's
//! start is a tick. The tree's cumulative cost is a line: the rows keep each thread's total
//! (`thread_usage`), not each turn's, so a thread's cost is spread evenly over its completed
//! turns (at its end when it has none).

use super::*;
use crate::domain::{Attention, Phase};

/// Threads a timeline draws at most (the first in tree order; the answer says when cut).
pub const MAX_TIMELINE: i64 = 1000;
/// Points of the cost line at most (more are thinned evenly, the last kept).
const MAX_COST_POINTS: usize = 2000;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimelineDoc {
    pub root_session: String,
    /// The database's clock is the writers'; the page draws live bars up to its own now.
    pub threads: Vec<Bar>,
    /// `[at, cumulative cost in USD]`, in time order.
    pub cost: Vec<(String, f64)>,
    /// Whether the tree has more threads than were drawn.
    pub truncated: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bar {
    pub id: String,
    pub path: String,
    pub level: i64,
    pub task: String,
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub start: String,
    /// When it closed; `None` while it is live (the bar runs to now).
    pub end: Option<String>,
    pub exit_kind: Option<crate::domain::ExitKind>,
    pub spans: Vec<Span>,
    /// Each turn's start.
    pub ticks: Vec<String>,
    pub cost_usd: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Span {
    pub from: String,
    /// `None`: up to the bar's end (now, for a live thread).
    pub to: Option<String>,
    pub kind: &'static str,
}

/// What a live thread is doing now, as a span's kind, from its row.
fn kind_now(r: &RowDoc) -> &'static str {
    match r.attention.as_ref().map(|n| n.attention) {
        Some(Attention::Asking) => return "asking",
        Some(Attention::Failed) => return "failed",
        _ => {}
    }
    match r.phase {
        Phase::Queued | Phase::Starting => "queued",
        Phase::Idle => "idle",
        Phase::Stopping => "stopped",
        Phase::Failed => "failed",
        _ => "busy",
    }
}

/// The kind an event starts, given the current one (`None`: no change).
fn kind_after(event: &str, current: &'static str) -> Option<&'static str> {
    Some(match event {
        "thread_started" | "thread_resumed" | "turn_completed" => "idle",
        "turn_started" => "busy",
        "ui_request" => "asking",
        "tool_started" | "assistant_message" if current == "asking" => "busy",
        "thread_stopping" => "stopped",
        "thread_error" => "failed",
        _ => return None,
    })
}

/// The bar of row `r` from its events (in order).
fn bar(r: RowDoc, events: &[&rows::TimelineEvent]) -> (Bar, Vec<String>) {
    let live = r.status == ThreadStatus::Live;
    let mut spans: Vec<Span> = vec![Span {
        from: r.created_at.clone(),
        to: None,
        kind: "queued",
    }];
    let mut ticks = Vec::new();
    let mut turns_done = Vec::new();
    let mut closed_at = None;
    for e in events {
        if e.kind == "thread_closed" {
            closed_at = Some(e.at.clone());
            continue;
        }
        if e.kind == "turn_started" {
            ticks.push(e.at.clone());
        }
        if e.kind == "turn_completed" {
            turns_done.push(e.at.clone());
        }
        let current = spans.last().map_or("queued", |s| s.kind);
        if let Some(next) = kind_after(&e.kind, current) {
            if next != current {
                push_span(&mut spans, &e.at, next);
            }
        }
    }
    if live {
        let now = kind_now(&r);
        if spans.last().map(|s| s.kind) != Some(now) {
            let at = std::cmp::max(
                r.last_event_at.clone(),
                spans.last().map(|s| s.from.clone()).unwrap_or_default(),
            );
            push_span(&mut spans, &at, now);
        }
    }
    let end = (!live).then(|| closed_at.unwrap_or_else(|| r.last_event_at.clone()));
    // The cost's moments: each completed turn, else the end (or its last event).
    if turns_done.is_empty() && r.spend.cost_usd > 0.0 {
        turns_done.push(end.clone().unwrap_or_else(|| r.last_event_at.clone()));
    }
    let bar = Bar {
        id: r.id,
        path: r.path,
        level: r.level,
        task: r.task,
        state: r.state,
        host: r.host,
        start: r.created_at,
        end,
        exit_kind: r.exit_kind,
        spans,
        ticks,
        cost_usd: r.spend.cost_usd,
    };
    (bar, turns_done)
}

/// Ends the last span at `at` and starts one of `kind` there (a span of no length is replaced).
fn push_span(spans: &mut Vec<Span>, at: &str, kind: &'static str) {
    if let Some(last) = spans.last_mut() {
        if last.from.as_str() >= at {
            last.kind = kind;
            return;
        }
        last.to = Some(at.to_string());
    }
    spans.push(Span {
        from: at.to_string(),
        to: None,
        kind,
    });
}

/// The timeline of `root`'s tree.
pub fn timeline(conn: &crate::store::Conn, root: &SessionId) -> Result<TimelineDoc> {
    let all = filter(None)?;
    let mut found = Vec::new();
    let mut offset = 0;
    while offset < MAX_TIMELINE {
        let limit = MAX_PAGE.min(MAX_TIMELINE - offset);
        let got = page(conn, root, &all, offset, limit)?.rows;
        let n = got.len() as i64;
        found.extend(got);
        if n < limit {
            break;
        }
        offset += n;
    }
    let truncated = found.len() as i64 == MAX_TIMELINE
        && !page(conn, root, &all, MAX_TIMELINE, 1)?.rows.is_empty();
    let events = rows::timeline_events(conn, root, MAX_TIMELINE)?;
    let mut by_thread: std::collections::HashMap<&str, Vec<&rows::TimelineEvent>> =
        std::collections::HashMap::new();
    for e in &events {
        by_thread.entry(e.thread_id.as_str()).or_default().push(e);
    }
    let mut moments: Vec<(String, f64)> = Vec::new();
    let threads = found
        .into_iter()
        .map(|r| {
            let evs = by_thread.get(r.id.as_str()).map_or(&[][..], |v| &v[..]);
            let cost = r.spend.cost_usd;
            let (bar, at) = bar(r, evs);
            let share = cost / at.len().max(1) as f64;
            moments.extend(at.into_iter().map(|t| (t, share)));
            bar
        })
        .collect();
    moments.sort_by(|a, b| a.0.cmp(&b.0));
    let mut total = 0.0;
    let mut cost: Vec<(String, f64)> = moments
        .into_iter()
        .map(|(t, c)| {
            total += c;
            (t, total)
        })
        .collect();
    if cost.len() > MAX_COST_POINTS {
        let step = cost.len().div_ceil(MAX_COST_POINTS);
        let last = cost.last().cloned();
        cost = cost.into_iter().step_by(step).collect();
        if let Some(l) = last {
            if cost.last().map(|c| &c.0) != Some(&l.0) {
                cost.push(l);
            }
        }
    }
    Ok(TimelineDoc {
        root_session: root.to_string(),
        threads,
        cost,
        truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_follow_the_events_and_a_span_of_no_length_is_replaced() {
        let mut spans = vec![Span {
            from: "a".into(),
            to: None,
            kind: "queued",
        }];
        push_span(&mut spans, "b", "idle");
        push_span(&mut spans, "b", "busy");
        push_span(&mut spans, "c", "asking");
        let kinds: Vec<_> = spans
            .iter()
            .map(|s| (s.from.as_str(), s.to.as_deref(), s.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                ("a", Some("b"), "queued"),
                ("b", Some("c"), "busy"),
                ("c", None, "asking")
            ]
        );
        assert_eq!(kind_after("tool_started", "busy"), None);
        assert_eq!(kind_after("tool_started", "asking"), Some("busy"));
        assert_eq!(kind_after("thread_stopping", "busy"), Some("stopped"));
    }
}
