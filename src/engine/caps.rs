//! The caps on running threads (issue 49): a wrap-up before the stop. Every cap that applies
//! to a thread this serve holds is watched: its own (`THREADBASE_THREAD_BUDGET_TOKENS`,
//! `_USD`, `THREADBASE_THREAD_MAX_TURNS`, the database's scope `thread`), its tree's
//! (`THREADBASE_BUDGET_*`, scope `tree`) and the team's (scope `team`). Past
//! `THREADBASE_BUDGET_WARN` of one (default 0.8) the child gets one message, a steer when it
//! is busy and a follow-up when it is idle, saying how much of which cap it used and asking it
//! to finish the step and report; its parent gets a notice (contract A) and the thread a
//! `budget_warned` event. At the cap its turn is aborted and it is stopped (`Runtime::stop`,
//! graceful: abort, SIGTERM, SIGKILL) with an exit message naming the cap, which the parent's
//! close notice quotes, after a `budget_stopped` event.
//!
//! Where it runs: the row watcher (`serve/watcher.rs`) calls [`check`] (`Engine::check_caps`) after a
//! commit (at most every 200 ms; the ingest writer's usage rows are commits like any other,
//! and so are another serve's, which move the tree's and the team's totals) and once a second.
//! One pass reads the budgets (at most three rows), the own usage of this serve's live
//! children (one batch query) and, when a tree or team cap is set, the tree's total (one
//! lookup) and the team's (two sums over a row per tree): nothing is read when no child is
//! live. What was told is kept in memory per live child: a child that closes and is started
//! again (resume) is judged afresh, so a resumed thread past the warning is told again in its
//! new run.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::budget::{thread_caps, tree_and_team_caps, Cap, CapScope, CapUse};
use super::Engine;
use crate::domain::ThreadId;
use crate::error::{Error, Result};
use crate::runtime::{SendMode, StopBy};
use crate::store::events::{self, NewEvent};
use crate::store::usage::{self, TreeOf, Usage};
use crate::store::{budgets, notices, ThreadIds};
use crate::time::now_iso;

/// What this serve told its live children, by thread: whether it asked for a wrap-up and
/// whether it stopped it.
#[derive(Default)]
pub(super) struct CapsTold {
    told: Mutex<HashMap<ThreadId, Told>>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Told {
    warned: bool,
    stopped: bool,
}

/// What one pass read.
struct Spend {
    caps: Vec<Cap>,
    tree_team: Vec<CapUse>,
    own: Vec<Usage>,
}

/// One pass over this serve's live children (see the module doc).
pub(super) async fn check(e: &Arc<Engine>) -> Result<()> {
    let live: Vec<(ThreadId, crate::runtime::ChildView)> =
        e.rt.live_ids()
            .into_iter()
            .filter_map(|id| {
                let v = e.rt.watch(&id)?.borrow().clone();
                (!v.closed).then_some((id, v))
            })
            .collect();
    {
        let mut told = e.caps.told.lock().unwrap_or_else(|p| p.into_inner());
        told.retain(|id, _| live.iter().any(|(l, _)| l == id));
    }
    if live.is_empty() {
        return Ok(());
    }
    let store = e.store.clone();
    let budget = e.cfg.budget;
    let (self_id, session_id) = (e.cfg.self_id.clone(), e.cfg.session_id.clone());
    let ids: Vec<ThreadId> = live.iter().map(|(id, _)| id.clone()).collect();
    let spend = tokio::task::spawn_blocking(move || -> Result<Option<Spend>> {
        let conn = store.read()?;
        let kept = budgets::read(&conn)?;
        let caps = thread_caps(&budget, &kept);
        let (tree, team) = tree_and_team_caps(&budget, &kept);
        if caps.is_empty() && tree.is_empty() && team.is_empty() {
            return Ok(None);
        }
        let mut tree_team = Vec::new();
        if !tree.is_empty() {
            let of = TreeOf {
                thread_id: None,
                self_id: self_id.as_ref(),
                session_id: &session_id,
            };
            let spent = usage::tree_spend(&conn, of)?;
            tree_team.extend(tree.iter().map(|c| c.using(&spent.usage)));
        }
        if !team.is_empty() {
            let spent = budgets::team_spend(&conn)?;
            tree_team.extend(team.iter().map(|c| c.using(&spent.usage)));
        }
        let own = if caps.is_empty() {
            Vec::new()
        } else {
            usage::of_threads(&conn, &ThreadIds::new(&ids)?)?
        };
        Ok(Some(Spend {
            caps,
            tree_team,
            own,
        }))
    })
    .await
    .map_err(|e| Error::internal(format!("the cap check stopped: {e}")))??;
    let Some(spend) = spend else {
        return Ok(());
    };
    for (i, (id, view)) in live.into_iter().enumerate() {
        // The cap this thread is nearest to: its own caps on its own spend, the tree's
        // and the team's on theirs; the first reached is the one that binds.
        let nearest = spend
            .own
            .get(i)
            .into_iter()
            .flat_map(|u| spend.caps.iter().map(move |c| c.using(u)))
            .chain(spend.tree_team.iter().copied())
            .max_by(|a, b| a.fraction().total_cmp(&b.fraction()));
        let Some(nearest) = nearest else {
            continue;
        };
        let reached = nearest.fraction() >= 1.0;
        if !reached && nearest.fraction() < budget.warn {
            continue;
        }
        let act = {
            let mut told = e.caps.told.lock().unwrap_or_else(|p| p.into_inner());
            let t = told.entry(id.clone()).or_default();
            if reached && !t.stopped {
                t.stopped = true;
                t.warned = true;
                Some(true)
            } else if !reached && !t.warned {
                t.warned = true;
                Some(false)
            } else {
                None
            }
        };
        match act {
            Some(true) => stop_at_cap(e, id, nearest),
            Some(false) => {
                let busy = view.phase == crate::runtime::mapping::Phase::Busy;
                warn_of_cap(e, id, nearest, busy, budget.warn)
            }
            None => {}
        }
    }
    Ok(())
}

/// The wrap-up: the event and the parent's notice, then the message to the child (a steer
/// when busy, a follow-up when idle), on a task of its own.
fn warn_of_cap(e: &Arc<Engine>, id: ThreadId, cap: CapUse, busy: bool, warn: f64) {
    let me = e.clone();
    tokio::spawn(async move {
        let to_child = wrap_up_text(&cap);
        let mode = if busy {
            SendMode::Steer
        } else {
            SendMode::FollowUp
        };
        let data = event_data(&cap, Some(mode), Some(warn)).to_string();
        let tid = id.clone();
        let written = me
            .rt
            .ingest()
            .write(move |tx| {
                let at = now_iso();
                events::append(
                    tx,
                    &tid,
                    &[NewEvent {
                        at: &at,
                        kind: "budget_warned",
                        data: &data,
                    }],
                )?;
                notices::budget_warned(tx, &tid, &warned_notice(&cap), &at)?;
                Ok(())
            })
            .await;
        if let Err(e) = written {
            tracing::warn!("recording the cap warning of {id} failed: {e}");
        }
        match me.rt.send(&id, mode, &to_child).await {
            Ok(out) if out.accepted != Some(false) => {}
            Ok(out) => tracing::warn!(
                "the wrap-up message to {id} was not taken: {}",
                out.error.unwrap_or_default()
            ),
            Err(e) => tracing::warn!("the wrap-up message to {id} failed: {e}"),
        }
    });
}

/// The stop at a cap: the event, then a graceful stop whose exit message names the cap.
fn stop_at_cap(e: &Arc<Engine>, id: ThreadId, cap: CapUse) {
    let me = e.clone();
    tokio::spawn(async move {
        let data = event_data(&cap, None, None).to_string();
        let tid = id.clone();
        let written = me
            .rt
            .ingest()
            .write(move |tx| {
                events::append(
                    tx,
                    &tid,
                    &[NewEvent {
                        at: &now_iso(),
                        kind: "budget_stopped",
                        data: &data,
                    }],
                )?;
                Ok(())
            })
            .await;
        if let Err(e) = written {
            tracing::warn!("recording the cap stop of {id} failed: {e}");
        }
        let reason = format!(
            "Stopped at its cap: it used {} ({}). Repair: {}",
            cap.used_text(),
            cap.cap.name(),
            cap.cap.repair()
        );
        if let Err(e) = me.rt.stop_for(&id, reason, StopBy::Other).await {
            tracing::warn!("stopping {id} at its cap failed: {e}");
        }
    });
}

/// What the child is told past the warning.
fn wrap_up_text(cap: &CapUse) -> String {
    format!(
        "[threadbase] Budget: this thread has used {} of {} {}. When it reaches the cap it is stopped. Finish the step you are on, then stop and report what you have: what is done, what is left, and anything the next step needs to know.",
        cap.used_text(),
        cap.cap.name(),
        match cap.cap.scope {
            CapScope::Thread => "(this thread's own cap)",
            CapScope::Tree => "(the cap on the whole tree of threads this thread belongs to)",
            CapScope::Team => "(the team's cap on the whole database)",
        }
    )
}

/// The parent's notice of a wrap-up (the thread's name and path go first, in the store).
fn warned_notice(cap: &CapUse) -> String {
    format!(
        "used {} ({}) and was asked to finish its step and report; at the cap it is stopped. Repair, to let it go on: {}",
        cap.used_text(),
        cap.cap.name(),
        cap.cap.repair()
    )
}

/// A cap event's data: which cap, its value, what was used.
fn event_data(cap: &CapUse, mode: Option<SendMode>, warn: Option<f64>) -> serde_json::Value {
    let mut data = json!({
        "scope": cap.cap.scope.as_str(),
        "cap": match cap.cap.kind {
            super::budget::CapKind::Tokens => "tokens",
            super::budget::CapKind::Usd => "usd",
            super::budget::CapKind::Turns => "turns",
        },
        "limit": cap.cap.value,
        "used": cap.used,
        "source": cap.cap.var.unwrap_or("budgets"),
        "message": format!("{} ({})", cap.used_text(), cap.cap.name()),
    });
    if let Some(m) = mode {
        data["delivery"] = json!(m.as_str());
    }
    if let Some(w) = warn {
        data["warnAt"] = json!(w);
    }
    data
}
