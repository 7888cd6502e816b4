//! How a worker's runs end (see the module docs of `engine::worker`): one task per launch
//! watches the child's phase and records each run's outcome, and the close's.

use crate::domain::{ExitKind, ThreadId, ThreadStatus};
use std::sync::Arc;

use tokio::sync::watch;

use super::{set_outcome, Interrupting};
use crate::contract::worker::Model;
use crate::error::Result;
use crate::runtime::mapping::Phase;
use crate::runtime::{ChildView, Runtime};
use crate::store::workers::{self, Activity, Outcome, RunMarks};
use crate::store::Store;

/// Where a monitor's bookkeeping stands: the last event seq and interrupt command id seen.
#[derive(Debug, Clone, Copy)]
pub(super) struct Marks {
    seq: i64,
    command: i64,
}

impl From<RunMarks> for Marks {
    fn from(m: RunMarks) -> Self {
        Marks {
            seq: m.last_seq,
            command: m.interrupt_command,
        }
    }
}

/// Events after `marks`, and the newest interrupt command id.
fn activity_since(store: &Store, id: &ThreadId, marks: Marks) -> Result<(Activity, i64)> {
    let conn = store.read()?;
    let activity = workers::activity_since(&conn, id, marks.seq)?;
    let now = workers::run_marks(&conn, id)?;
    Ok((activity, now.interrupt_command))
}

/// Watches one launch of a worker and records how each run ends (see the module docs).
pub(super) async fn monitor(
    store: Arc<Store>,
    rt: Runtime,
    id: ThreadId,
    mut view: watch::Receiver<ChildView>,
    mut marks: Marks,
    interrupting: Interrupting,
) {
    let mut in_run = false;
    loop {
        let (phase, closed) = {
            let v = view.borrow_and_update();
            (v.phase, v.closed)
        };
        if closed {
            break;
        }
        match phase {
            Phase::Busy => in_run = true,
            Phase::Idle => {
                rt.flush().await;
                match activity_since(&store, &id, marks) {
                    Ok((activity, command)) if in_run || activity.active => {
                        let aborted = interrupting.contains(&id) || command > marks.command;
                        let outcome = if aborted {
                            Outcome::Interrupted
                        } else if activity.errored {
                            Outcome::Failed
                        } else {
                            Outcome::Succeeded
                        };
                        learn_model(&store, &id);
                        if let Err(err) = set_outcome(&store, &id, outcome) {
                            tracing::error!("recording the outcome of {id} failed: {err}");
                        }
                        interrupting.remove(&id);
                        marks = Marks {
                            seq: activity.seq,
                            command,
                        };
                        in_run = false;
                    }
                    Ok(_) => {}
                    Err(err) => tracing::error!("reading the activity of {id} failed: {err}"),
                }
            }
            // A closed thread's phases: the view says `closed` first.
            Phase::Starting | Phase::Queued | Phase::Stopping | Phase::Failed | Phase::Stale => {}
        }
        if view.changed().await.is_err() {
            break;
        }
    }
    rt.flush().await;
    if let Err(err) = record_close(&store, &id, marks, in_run) {
        tracing::error!("recording the outcome of {id} failed: {err}");
    }
    interrupting.remove(&id);
}

/// A worker whose args name no model learns it from its session file after a run: the last
/// `model_change` entry or assistant message with `provider` and `modelId`/`model`.
fn learn_model(store: &Store, id: &ThreadId) {
    let source = store
        .read()
        .ok()
        .and_then(|conn| workers::model_source(&conn, id).ok().flatten());
    let Some(workers::ModelSource {
        known: false,
        session_file: Some(file),
    }) = source
    else {
        return;
    };
    let Ok(text) = std::fs::read_to_string(&file) else {
        return;
    };
    let model = text
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|entry| {
            let (provider, model) = match entry["type"].as_str() {
                Some("model_change") => (&entry["provider"], &entry["modelId"]),
                Some("message") if entry["message"]["role"] == "assistant" => {
                    (&entry["message"]["provider"], &entry["message"]["model"])
                }
                _ => return None,
            };
            Some(Model {
                provider_id: provider.as_str()?.to_string(),
                id: model.as_str()?.to_string(),
                variant: None,
            })
        });
    let Some(Ok(model)) = model.as_ref().map(serde_json::to_string) else {
        return;
    };
    let _ = store.write(|tx| workers::set_model(tx, id, &model));
}

/// The process closed: a run in progress ends `interrupted` (`failed` for a failed exit or an
/// errored run); a failed exit while idle is `failed`; otherwise the last outcome stands.
fn record_close(store: &Store, id: &ThreadId, marks: Marks, in_run: bool) -> Result<()> {
    let (activity, _) = activity_since(store, id, marks)?;
    let row = workers::run_marks(&store.read()?, id)?;
    if row.status != ThreadStatus::Closed {
        return Ok(());
    }
    let failed_exit = row.exit_kind == Some(ExitKind::Failed);
    let outcome = if in_run || activity.active {
        if failed_exit || activity.errored {
            Outcome::Failed
        } else {
            Outcome::Interrupted
        }
    } else if failed_exit {
        Outcome::Failed
    } else {
        return Ok(());
    };
    set_outcome(store, id, outcome)
}
