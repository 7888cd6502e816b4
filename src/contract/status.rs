//! The status line of a tree (issue 45 item 4, issue 49 item 4): its threads by condition and
//! what it spent, in one short line (`threads: 2 busy · 1 asking · 1 failed · $0.42`), and the
//! `status` notification serve sends with it (`--report-status`), which the Pi extension shows
//! with `ctx.ui.setStatus`. The counts are `store::status`'s.

use std::fmt::Write as _;

use serde::Serialize;

use crate::store::status::{Counts, TreeStatus};

/// What a status line begins with.
pub const PREFIX: &str = "threads: ";

/// The status line of `s`: each condition some thread is in (`2 busy`), the phases first, then
/// what needs the user, and the spend (`$0.42`; under a cent `$0.0042`; without a cost, the
/// tokens: `12.3k tokens`), joined by ` · `. `None` when no thread counts and nothing was
/// spent: there is nothing to show.
pub fn line(s: &TreeStatus) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = s
        .counts
        .words()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(word, n)| format!("{n} {word}"))
        .collect();
    if s.cost_usd > 0.0 {
        let mut cost = String::new();
        if s.cost_usd < 0.01 {
            let _ = write!(cost, "${:.4}", s.cost_usd);
        } else {
            let _ = write!(cost, "${:.2}", s.cost_usd);
        }
        parts.push(cost);
    } else if s.tokens > 0 {
        parts.push(format!("{} tokens", crate::text::compact_count(s.tokens)));
    }
    Some(format!("{PREFIX}{}", parts.join(" · ")))
}

/// `status` notification params: the line (`""` clears it), the counts by condition (zeros
/// left out), the spend in USD and tokens.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusNotice<'a> {
    pub text: String,
    pub counts: &'a Counts,
    pub cost_usd: f64,
    pub tokens: i64,
}

impl<'a> StatusNotice<'a> {
    pub fn of(s: &'a TreeStatus) -> StatusNotice<'a> {
        StatusNotice {
            text: line(s).unwrap_or_default(),
            counts: &s.counts,
            cost_usd: s.cost_usd,
            tokens: s.tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(counts: Counts, cost_usd: f64, tokens: i64) -> TreeStatus {
        TreeStatus {
            counts,
            cost_usd,
            tokens,
        }
    }

    #[test]
    fn a_line_names_each_condition_then_the_spend() {
        let s = status(
            Counts {
                busy: 2,
                asking: 1,
                failed: 1,
                ..Counts::default()
            },
            0.42,
            12_345,
        );
        assert_eq!(
            line(&s).as_deref(),
            Some("threads: 2 busy · 1 asking · 1 failed · $0.42")
        );
        let every = status(
            Counts {
                starting: 1,
                queued: 2,
                busy: 3,
                idle: 4,
                stopping: 5,
                asking: 6,
                stalled: 7,
                failed: 8,
                unreachable: 9,
                owner_gone: 10,
            },
            0.0042,
            0,
        );
        assert_eq!(
            line(&every).as_deref(),
            Some("threads: 1 starting · 2 queued · 3 busy · 4 idle · 5 stopping · 6 asking · 7 stalled · 8 failed · 9 host unreachable · 10 owner gone · $0.0042")
        );
    }

    #[test]
    fn without_a_cost_the_tokens_show_and_with_nothing_there_is_no_line() {
        let idle = Counts {
            idle: 1,
            ..Counts::default()
        };
        assert_eq!(
            line(&status(idle, 0.0, 12_345)).as_deref(),
            Some("threads: 1 idle · 12.3k tokens")
        );
        assert_eq!(
            line(&status(idle, 0.0, 0)).as_deref(),
            Some("threads: 1 idle")
        );
        assert_eq!(
            line(&status(Counts::default(), 1.5, 10)).as_deref(),
            Some("threads: $1.50")
        );
        assert_eq!(line(&status(Counts::default(), 0.0, 0)), None);
    }

    #[test]
    fn the_notice_carries_the_line_the_nonzero_counts_and_the_spend() {
        let s = status(
            Counts {
                busy: 1,
                owner_gone: 2,
                ..Counts::default()
            },
            0.5,
            99,
        );
        assert_eq!(
            serde_json::to_value(StatusNotice::of(&s)).unwrap(),
            serde_json::json!({"text": "threads: 1 busy · 2 owner gone · $0.50",
                "counts": {"busy": 1, "owner_gone": 2}, "costUsd": 0.5, "tokens": 99})
        );
        let empty = TreeStatus::default();
        assert_eq!(
            serde_json::to_value(StatusNotice::of(&empty)).unwrap(),
            serde_json::json!({"text": "", "counts": {}, "costUsd": 0.0, "tokens": 0})
        );
    }
}
