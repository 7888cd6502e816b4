//! A tree's status at a glance (issue 45 item 4, issue 49 item 4): how many of the threads of
//! one root session's tree (every manager of it, children's own serves included) are in each
//! condition, and what the tree spent. A live thread's condition is what the view
//! `thread_attention` says of it (asking, failed, stalled, unreachable, owner gone), else its
//! phase; a closed thread counts only when the view calls it failed. One query,
//! `sql/tree_status.sql`: one range of `thread_places_by_key`. The text is
//! `contract::status::line`'s; serve's row watcher sends it to an interactive session.

use serde::Serialize;

use crate::domain::{Attention, Phase, SessionId, ThreadId};
use crate::error::{Error, Result};
use crate::store::db::{named, q};
use crate::store::rows::columns;
use crate::store::Conn;

columns! {
    /// A condition of a tree's threads and the tree's spend (`{tree_status_row}` in
    /// `sql/tree_status.sql`, which reads `root r LEFT JOIN counted c LEFT JOIN tree_usage
    /// LEFT JOIN session_usage`): `ATTENTION` or `PHASE` names the condition (both NULL on the
    /// one row of a tree where nothing counts), `THREADS` how many are in it.
    pub mod col as "{tree_status_row}" {
        ATTENTION = "c.attention",
        PHASE = "c.phase",
        THREADS = "coalesce(c.n, 0)",
        COST_USD = "coalesce(tree_usage.cost_usd, 0) + coalesce(session_usage.cost_usd, 0)",
        TOKENS = "coalesce(tree_usage.input_tokens, 0) + coalesce(tree_usage.output_tokens, 0) + coalesce(tree_usage.cache_read_tokens, 0) + coalesce(tree_usage.cache_write_tokens, 0) + coalesce(session_usage.input_tokens, 0) + coalesce(session_usage.output_tokens, 0) + coalesce(session_usage.cache_read_tokens, 0) + coalesce(session_usage.cache_write_tokens, 0)",
    }
}

/// How many threads of a tree are in each condition: the live phases, then the view's words
/// (a closed thread only ever as `failed`). Serialized with the words as keys, zeros left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    #[serde(skip_serializing_if = "is_zero")]
    pub starting: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub queued: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub busy: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub idle: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub stopping: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub asking: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub stalled: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub failed: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub unreachable: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub owner_gone: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

impl Counts {
    /// Every count with the word the state texts use for it (`host unreachable`, `owner gone`),
    /// in the order a status line shows them: the phases, then what needs the user.
    pub fn words(&self) -> [(&'static str, i64); 10] {
        [
            (Phase::Starting.as_str(), self.starting),
            (Phase::Queued.as_str(), self.queued),
            (Phase::Busy.as_str(), self.busy),
            (Phase::Idle.as_str(), self.idle),
            (Phase::Stopping.as_str(), self.stopping),
            (Attention::Asking.word(), self.asking),
            (Attention::Stalled.word(), self.stalled),
            (Attention::Failed.word(), self.failed),
            (Attention::Unreachable.word(), self.unreachable),
            (Attention::OwnerGone.word(), self.owner_gone),
        ]
    }

    /// Whether no thread counts.
    pub fn is_empty(&self) -> bool {
        *self == Counts::default()
    }

    fn slot(&mut self, attention: Option<Attention>, phase: Option<Phase>) -> Option<&mut i64> {
        Some(match (attention, phase) {
            (Some(Attention::Asking), _) => &mut self.asking,
            (Some(Attention::Stalled), _) => &mut self.stalled,
            (Some(Attention::Failed), _) => &mut self.failed,
            (Some(Attention::Unreachable), _) => &mut self.unreachable,
            (Some(Attention::OwnerGone), _) => &mut self.owner_gone,
            (None, Some(Phase::Starting)) => &mut self.starting,
            (None, Some(Phase::Queued)) => &mut self.queued,
            (None, Some(Phase::Busy)) => &mut self.busy,
            (None, Some(Phase::Idle)) => &mut self.idle,
            (None, Some(Phase::Stopping)) => &mut self.stopping,
            // A closed thread's phase is never asked for; the query gives none.
            (None, Some(Phase::Failed | Phase::Stale)) | (None, None) => return None,
        })
    }
}

/// A tree's status: its threads by condition and what the tree spent (its threads and the root
/// session's own turns, as `threadbase usage` totals the tree).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeStatus {
    pub counts: Counts,
    pub cost_usd: f64,
    pub tokens: i64,
}

impl TreeStatus {
    /// Nothing counts and nothing was spent.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty() && self.cost_usd <= 0.0 && self.tokens == 0
    }
}

/// The status of the tree this serve belongs to: the root session of this serve's own thread
/// (`self_id`), else of the thread whose id is `session_id` (a contract C worker), else
/// `session_id` itself, as the budgets and `threadbase usage` find it. One query.
pub fn of_tree(
    conn: &Conn,
    self_id: Option<&ThreadId>,
    session_id: &SessionId,
) -> Result<TreeStatus> {
    let mut status = TreeStatus::default();
    conn.each(
        q!("tree_status", col),
        named! {":self_id": self_id, ":session_id": session_id},
        |r| {
            status.cost_usd = r.get(col::COST_USD)?;
            status.tokens = r.get(col::TOKENS)?;
            let attention: Option<Attention> = r.get(col::ATTENTION)?;
            let phase: Option<Phase> = r.get(col::PHASE)?;
            let n: i64 = r.get(col::THREADS)?;
            match status.counts.slot(attention, phase) {
                Some(slot) => *slot += n,
                None if attention.is_none() && phase.is_none() => {}
                None => {
                    return Err(Error::internal(format!(
                        "sql/tree_status.sql counted {n} threads in phase {phase:?}, which no live thread has"
                    )))
                }
            }
            Ok(())
        },
    )?;
    Ok(status)
}
