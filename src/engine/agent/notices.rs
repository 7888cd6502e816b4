//! Notices for a parent agent, and the row watcher's side of contract B. A request that will
//! itself report a thread's settled view holds that thread's notices back, so the caller does
//! not get the same news twice (not a timeout notice: the report does not carry it); the row
//! watcher claims and emits the notices due to this serve's agent path and hands back the
//! threads whose steering or retirement is due here.

use crate::domain::{ManagerId, ThreadId};

use serde::Serialize;

use super::Agents;
use crate::engine::notices::Hold;
use crate::error::Result;
use crate::store::agents::mailbox;
use crate::store::agents::{self, AgentRow};
use crate::time::now_iso;

/// The line a notice goes out as (`{"method": "notice", "params": …}`).
#[derive(Serialize)]
struct NoticeLine<'a> {
    method: &'static str,
    params: NoticeParams<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NoticeParams<'a> {
    thread_id: &'a str,
    path: &'a str,
    kind: &'a str,
    state: Option<&'a str>,
    message_id: String,
    text: &'a str,
    created_at: &'a str,
    recipient: &'a str,
    /// A timeout notice's length and what the child said last (0.19's `timeout` notice).
    #[serde(skip_serializing_if = "Option::is_none")]
    timeout_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recent_output: Option<String>,
    /// A recap's results (`[{path, state, text}]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    results: Option<serde_json::Value>,
}

impl<'e> Agents<'e> {
    /// Holds back `id`'s notices for this caller until the guard drops: the request will
    /// return the thread's view itself. Registered before the thread can settle, so the row
    /// watcher cannot deliver the settlement's notice first.
    pub(super) fn hold_notices(&self, id: &ThreadId) -> Hold<'e> {
        self.0.notice_holds.hold(&self.0.store, id)
    }

    /// The caller got `id`'s settled view (or its failure) in a tool result: its pending
    /// notices for the caller (progress and settlement) say nothing new and are marked
    /// delivered without being sent. Called while they are held.
    pub(super) fn supersede_notices(&self, id: &ThreadId) -> Result<()> {
        self.store
            .write(|tx| mailbox::supersede_notices(tx, id, self.caller(), &now_iso()))?;
        // The settlement this serve quieted while holding is now reported: it stays delivered.
        self.notice_holds.reported(id);
        Ok(())
    }

    /// `view` of a thread a request held notices for: supersedes them when it is settled.
    pub(super) fn reported(&self, row: AgentRow) -> Result<crate::engine::Reply> {
        self.reported_noted(row, None)
    }

    /// [`Agents::reported`], with `agent_spawn`'s isolation note (issue 48) when there is one.
    pub(super) fn reported_noted(
        &self,
        row: AgentRow,
        note: Option<String>,
    ) -> Result<crate::engine::Reply> {
        if !row.active() {
            self.supersede_notices(&row.id)?;
        }
        super::spawn::noted(row, note)
    }

    /// This serve's contract B rows after another connection committed (called by the row
    /// watcher with its own connection): notices for its agent path are claimed and handed to
    /// `emit` as notification lines (the watcher writes them out), and the threads whose process it holds with steering to deliver or a settled run
    /// to retire are returned for [`Agents::sweep`].
    pub(crate) fn rows_changed(
        &self,
        conn: &crate::store::Conn,
        emit: &dyn Fn(Vec<u8>),
    ) -> Result<(Vec<ThreadId>, Vec<ThreadId>)> {
        let registry = self.agent.registry();
        self.release_recap_if_due(conn, registry)?;
        self.deliver_notices(conn, registry, emit)?;
        self.read_next_timer(conn)?;
        self.sweep_rows(conn, registry)
    }

    fn deliver_notices(
        &self,
        conn: &crate::store::Conn,
        registry: ManagerId,
        emit: &dyn Fn(Vec<u8>),
    ) -> Result<()> {
        for n in mailbox::pending_notices(conn, registry, self.caller())? {
            let details: Option<serde_json::Value> = n
                .details
                .as_deref()
                .and_then(|d| serde_json::from_str(d).ok());
            let detail_kind = details
                .as_ref()
                .and_then(|d| d["kind"].as_str().map(str::to_string));
            // A request of this serve is about to report on the thread: its progress and
            // settlement notices wait. A timeout notice is no part of that report (0.19 sends
            // it whenever the timer fires while the child works, a blocking spawn's too).
            if self.notice_holds.is_held(&n.thread_id) && detail_kind.as_deref() != Some("timeout")
            {
                continue;
            }
            if self.consume_mail(n.id)? {
                let line = serde_json::to_vec(&NoticeLine {
                    method: "notice",
                    params: NoticeParams {
                        thread_id: n.thread_id.as_str(),
                        path: &n.path,
                        kind: detail_kind.as_deref().unwrap_or(n.kind.as_str()),
                        state: n.state.as_deref(),
                        message_id: format!("agent-mailbox-{}", n.id),
                        text: &n.body,
                        created_at: &n.created_at,
                        recipient: self.caller(),
                        timeout_ms: details.as_ref().and_then(|d| d["timeoutMs"].as_i64()),
                        recent_output: details
                            .as_ref()
                            .and_then(|d| d["recentOutput"].as_str().map(str::to_string)),
                        results: details.as_ref().and_then(|d| d.get("results").cloned()),
                    },
                })?;
                emit(line);
            }
        }
        Ok(())
    }

    /// Threads this serve holds that have steering to deliver, and settled ones to retire.
    fn sweep_rows(
        &self,
        conn: &crate::store::Conn,
        registry: ManagerId,
    ) -> Result<(Vec<ThreadId>, Vec<ThreadId>)> {
        let steer_ids = mailbox::owned_pending_steers(conn, registry, self.run_owner())?;
        let settled = agents::owned_live(conn, registry, self.run_owner())?
            .into_iter()
            .filter(|t| !t.active)
            .map(|t| t.id)
            .collect();
        Ok((steer_ids, settled))
    }

    /// Delivers steering to, or retires, the threads [`Agents::rows_changed`] returned.
    pub(crate) async fn sweep(&self, steer_ids: Vec<ThreadId>, settled: Vec<ThreadId>) {
        for id in steer_ids {
            let engine = self.arc();
            tokio::spawn(async move {
                if let Err(e) = Agents(&engine).deliver_steering(&id).await {
                    tracing::error!("delivering steering to {id} failed: {e}");
                }
            });
        }
        for id in settled {
            if let Err(e) = self.retire_if_done(&id).await {
                tracing::error!("retiring {id} failed: {e}");
            }
        }
    }
}
