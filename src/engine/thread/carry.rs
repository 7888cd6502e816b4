//! Actions another serve wrote for a thread this serve holds (or manages), carried out here.

use super::resume::{resume_here, Place};
use super::send::{send_here, SendPayload};
use super::{closed_error, gone_meanwhile, Engine};
use crate::domain::{CommandKind, ThreadId};
use crate::error::{Error, Result};
use crate::store::threads::thread_by_id_any;

/// A `send`, `resume` or `merge` another process wrote for a thread this serve holds (or manages), as
/// the row watcher hands it over: the outcome text for `commands.result`.
pub(crate) async fn carry_out(
    e: &Engine,
    kind: CommandKind,
    thread_id: &ThreadId,
    payload: Option<&str>,
) -> Result<String> {
    let row =
        thread_by_id_any(&e.store.read()?, thread_id)?.ok_or_else(|| gone_meanwhile(thread_id))?;
    match kind {
        CommandKind::Send => {
            let p: SendPayload = serde_json::from_str(payload.unwrap_or("null")).map_err(|err| {
                Error::invalid(format!(
                    "The send request for {} has no valid payload ({err}). Repair: send again from the thread tool.",
                    row.path
                ))
            })?;
            e.rt.await_launch(&row.id, crate::runtime::LAUNCH_WAIT)
                .await;
            if !e.rt.is_live(&row.id) {
                return Err(closed_error(&row.path, &row));
            }
            Ok(serde_json::to_string(
                &send_here(
                    e,
                    &row,
                    &p.message,
                    p.mode,
                    p.by.as_deref().unwrap_or("another process (a commands row)"),
                )
                .await?,
            )?)
        }
        CommandKind::Resume => {
            e.rt.await_launch(&row.id, crate::runtime::LAUNCH_WAIT)
                .await;
            let place = if row.manager_id == e.manager_id {
                Place::Own
            } else {
                Place::Below
            };
            Ok(serde_json::to_string(&resume_here(e, &row, place).await?)?)
        }
        CommandKind::Merge => {
            // Issue 48: the web page's Merge, on the worktree's host (this serve holds or
            // manages the thread); refusals change nothing (`review::merge`).
            let squash = payload
                .and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok())
                .and_then(|v| v["squash"].as_bool())
                .unwrap_or(false);
            let store = e.store.clone();
            let id = row.id.to_string();
            let outcome = tokio::task::spawn_blocking(move || {
                crate::engine::review::merge(&store, &id, squash)
            })
            .await
            .map_err(|err| Error::internal(format!("the merge stopped: {err}")))??;
            Ok(serde_json::to_string(&outcome)?)
        }
        CommandKind::Stop | CommandKind::ForceStop | CommandKind::Interrupt => {
            Err(Error::internal(format!(
                "A {kind} command for {} went to the send and resume queue. Repair: this is a bug in threadbase; stop the thread again.",
                row.path
            )))
        }
    }
}
