//! A child's dialogs asked of its parent (`THREADBASE_UI=parent`, issue 30). The dialog becomes
//! a `ui_requests` row and the child waits. A task per question reads the row until it is
//! answered (by any process: the `thread_answer` tool, `threadbase answer`, `top`), ended, or its
//! deadline passes; then it answers the child: the answer, or `cancelled` as without the
//! setting. The row is the only record: a serve that dies meanwhile leaves it pending, and the
//! restore pass that closes the thread cancels it in the same transaction.

use std::sync::Arc;
use std::time::Duration;

use super::child::Child;
use super::mapping::Dialog;
use super::{rpc, Runtime, LOG_TARGET};
use crate::domain::{QuestionState, ThreadId};
use crate::store::questions::{self, NewQuestion};
use crate::time::now_iso;

/// How often a pending question's row is read for an answer.
const ANSWER_POLL: Duration = Duration::from_millis(50);

/// Who ended a question that timed out (`ui_requests.answered_by`).
pub const BY_TIMEOUT: &str = "timeout";

impl Runtime {
    /// Records `dialog` as a pending question of `child`'s thread and waits for its answer on
    /// a task of its own (the child's stream goes on meanwhile).
    pub(super) fn ask_parent(&self, child: &Arc<Child>, dialog: Dialog) {
        let Some(timeout) = self.ui_parent() else {
            return;
        };
        let rt = self.clone();
        let child = child.clone();
        tokio::spawn(async move {
            if let Err(e) = rt.ask(&child, &dialog, timeout).await {
                tracing::warn!(target: LOG_TARGET, thread = %child.thread_id, "a child's question failed ({e}); it is cancelled");
                child.rpc.notify(rpc::cancel_ui(&dialog.id)).await;
                child.view.send_modify(|v| v.asking = false);
            }
        });
    }

    async fn ask(
        &self,
        child: &Arc<Child>,
        d: &Dialog,
        timeout: Duration,
    ) -> crate::error::Result<()> {
        let store = self.inner.store.clone();
        let deadline_ms = crate::time::now_ms() + timeout.as_millis() as i64;
        let at = now_iso();
        let asked = NewQuestion {
            thread_id: &child.thread_id,
            launch_seq: child.launch_seq,
            request_id: &d.id,
            kind: d.kind,
            title: d.title.as_deref(),
            message: d.message.as_deref(),
            options: d.options.as_deref(),
            at: &at,
            deadline_ms,
        };
        // The parent is told in the same transaction: contract B's by its notice, contract
        // A's by a notice that names the call answering it (issue 45).
        let qid = store.write(|tx| {
            let qid = questions::insert(tx, &asked)?;
            questions::notify_parent_agent(tx, &asked, qid)?;
            crate::store::notices::asked(tx, &asked, qid)?;
            Ok(qid)
        })?;
        child.view.send_modify(|v| v.asking = true);
        let mut view = child.view.subscribe();
        let reply = loop {
            let q = questions::by_id(&store.read()?, qid)?;
            match q {
                Some(q) if q.state == QuestionState::Pending => {}
                Some(q) if q.state == QuestionState::Answered => {
                    break q.answer.map(|a| rpc::answer_ui(&d.id, &a));
                }
                // Ended by a stop, an exit or a restore: the child is cancelled (if it is still
                // there to hear it).
                _ => break None,
            }
            if view.borrow().closed {
                // The close recorded the exit and cancelled the row in one transaction.
                child.view.send_modify(|v| v.asking = false);
                return Ok(());
            }
            if crate::time::now_ms() >= deadline_ms {
                store.write(|tx| {
                    questions::end(tx, qid, QuestionState::TimedOut, BY_TIMEOUT, &now_iso())
                })?;
                // Answered in the same instant? The row says which happened.
                continue;
            }
            let _ = tokio::time::timeout(ANSWER_POLL, view.changed()).await;
        };
        child
            .rpc
            .notify(reply.unwrap_or_else(|| rpc::cancel_ui(&d.id)))
            .await;
        child
            .view
            .send_modify(|v| v.asking = still_asking(&store, &child.thread_id));
        Ok(())
    }
}

/// Whether another question of the thread still waits.
fn still_asking(store: &crate::store::Store, thread_id: &ThreadId) -> bool {
    store
        .read()
        .ok()
        .and_then(|c| questions::pending_of(&c, thread_id).ok().flatten())
        .is_some()
}
