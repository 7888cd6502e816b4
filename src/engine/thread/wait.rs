//! `wait`: on a child's watch channel with periodic refreshes, or on the rows of a thread
//! another serve holds; progress notifications in both.

use std::time::{Duration, Instant};

use super::remote;
use super::{find, gone_meanwhile, reply, Engine, REFRESH_TIMEOUT, WAIT_STEP};
use crate::contract::format;
use crate::contract::projection::{Detail, Projection};
use crate::contract::thread::{Details, Single, SnapshotJson};
use crate::domain::{Phase, ThreadId};
use crate::engine::Reply;
use crate::error::Result;
use crate::identity::Holder;
use crate::store::queue::{self, QueueState};
use crate::store::threads::{thread_by_id_any, ThreadRow};
use crate::store::{commands, notices, questions};

/// Waits while `id` waits in the queue (or its claimed launch has not started), with progress
/// every [`WAIT_STEP`]; true when the deadline passed first.
async fn through_queue(
    e: &Engine,
    id: &ThreadId,
    detail: Detail,
    timeout_ms: u64,
    started: Instant,
    progress: &(dyn Fn(&Details) + Send + Sync),
) -> Result<bool> {
    let deadline = started + Duration::from_millis(timeout_ms);
    let mut next_progress = Instant::now();
    loop {
        if queue::state(&e.store.read()?, id)? == QueueState::NotQueued {
            return Ok(false);
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(true);
        }
        if now >= next_progress {
            report_waiting(e, id, started, detail, progress)?;
            next_progress = now + WAIT_STEP;
        }
        tokio::time::sleep(ROW_WAIT_POLL.min(deadline.saturating_duration_since(now))).await;
    }
}

pub(in crate::engine) async fn wait(
    e: &Engine,
    req: crate::contract::thread::Wait,
    progress: &(dyn Fn(&Details) + Send + Sync),
) -> Result<Reply> {
    let (reference, detail, timeout_ms) = (req.id.as_str(), req.detail, req.timeout_ms);
    let row = find(e, reference)?;
    // This manager's thread: its notices come to this serve's caller, and this wait's result
    // will give the news they carry (a thread of a child's own manager notifies that child).
    let _hold = (row.manager_id == e.manager_id).then(|| e.notice_holds.hold(&e.store, &row.id));
    let started = Instant::now();
    // A thread waiting in the queue (THREADBASE_QUEUE=1): the wait goes on through the queue
    // until it is launched, within the same deadline.
    if through_queue(e, &row.id, detail, timeout_ms, started, progress).await? {
        return waited(e, &row.id, detail, true, started);
    }
    e.rt.await_launch(&row.id, crate::runtime::LAUNCH_WAIT)
        .await;
    if e.rt.watch(&row.id).is_none() {
        match remote::holder(e, &row.id)? {
            // Another serve holds it, or held it and died (a watcher's restore pass closes it
            // within about a second): its rows say when it is done.
            Some(Holder::Elsewhere(_) | Holder::Gone) => {
                return wait_on_rows(e, &row, detail, timeout_ms, started, progress).await
            }
            Some(Holder::Here) | None => {}
        }
    }
    let deadline = started + Duration::from_millis(timeout_ms);
    let timed_out = loop {
        let Some(mut view) = e.rt.watch(&row.id) else {
            break false;
        };
        if view.borrow().closed {
            break false;
        }
        // A question waits for the caller's answer (THREADBASE_UI=parent): the wait returns
        // with it at once.
        let asking = view.borrow().asking;
        if asking && question_pending(e, &row.id)? {
            break false;
        }
        let now = Instant::now();
        if now >= deadline {
            break true;
        }
        let remaining = deadline - now;
        let idle =
            e.rt.refresh(&row.id, REFRESH_TIMEOUT.min(remaining))
                .await
                .map(|(idle, _)| idle)
                .unwrap_or(false);
        report_waiting(e, &row.id, started, detail, progress)?;
        if idle || view.borrow().closed {
            break false;
        }
        let pause = WAIT_STEP.min(deadline.saturating_duration_since(Instant::now()));
        let _ = tokio::time::timeout(
            pause,
            view.wait_for(move |v| v.closed || (v.asking && !asking)),
        )
        .await;
    };
    e.rt.flush().await;
    let (reply, asked) = answer(e, &row.id, detail, timed_out, started)?;
    if !timed_out && !asked && row.manager_id == e.manager_id {
        // The result reports the thread settled or closed: its notices are given.
        e.store
            .write(|tx| notices::quiet(tx, &row.id, &crate::time::now_iso()))?;
    }
    Ok(reply)
}

/// `wait`'s progress notification: the thread's snapshot so far at the wait's detail, with
/// `running`, `detail` and `nextSuggestedActions` as in every single-thread result.
fn report_waiting(
    e: &Engine,
    id: &ThreadId,
    started: Instant,
    detail: Detail,
    progress: &(dyn Fn(&Details) + Send + Sync),
) -> Result<()> {
    let facts = e.facts(id)?;
    let projection = Projection::new(&facts, detail);
    let snap = projection.snapshot();
    let json = SnapshotJson::new(&snap)?;
    progress(&Details::Waiting {
        thread: Single::of(json),
        waited_ms: started.elapsed().as_millis() as u64,
    });
    Ok(())
}

/// `wait`'s answer.
fn waited(
    e: &Engine,
    id: &ThreadId,
    detail: Detail,
    timed_out: bool,
    started: Instant,
) -> Result<Reply> {
    Ok(answer(e, id, detail, timed_out, started)?.0)
}

/// `wait`'s answer, and whether a question of the thread waits for the caller's answer (its
/// facts' pending question: read in the same statement).
fn answer(
    e: &Engine,
    id: &ThreadId,
    detail: Detail,
    timed_out: bool,
    started: Instant,
) -> Result<(Reply, bool)> {
    let facts = e.facts(id)?;
    let asked = facts.pending.question.is_some();
    let projection = Projection::new(&facts, detail);
    let snap = projection.snapshot();
    let waited = started.elapsed().as_millis() as u64;
    let text = format::waited(&projection, &snap, timed_out, waited);
    let answer = reply(
        text,
        Details::Waited {
            thread: Single::of(SnapshotJson::new(&snap)?),
            timed_out,
            waited_ms: waited,
        },
    )?;
    Ok((answer, asked))
}

/// How often a wait on a thread another serve holds reads its rows.
const ROW_WAIT_POLL: Duration = Duration::from_millis(50);

/// `wait` on a thread another serve holds: its rows are read until they say closed, or idle
/// with no send to it still being carried out (the holding serve writes the phase its own
/// refreshes and the child's events give), or until the deadline. Progress goes out every
/// [`WAIT_STEP`], as with a child of this serve.
async fn wait_on_rows(
    e: &Engine,
    row: &ThreadRow,
    detail: Detail,
    timeout_ms: u64,
    started: Instant,
    progress: &(dyn Fn(&Details) + Send + Sync),
) -> Result<Reply> {
    let deadline = started + Duration::from_millis(timeout_ms);
    let mut next_progress = Instant::now();
    let timed_out = loop {
        let now_row =
            thread_by_id_any(&e.store.read()?, &row.id)?.ok_or_else(|| gone_meanwhile(&row.id))?;
        if !now_row.is_live() {
            break false;
        }
        let now = Instant::now();
        if now >= deadline {
            break true;
        }
        if now_row.phase() == Phase::Idle && !send_under_way(e, &row.id)? {
            break false;
        }
        if question_pending(e, &row.id)? {
            break false;
        }
        if now >= next_progress {
            report_waiting(e, &row.id, started, detail, progress)?;
            next_progress = now + WAIT_STEP;
        }
        tokio::time::sleep(ROW_WAIT_POLL.min(deadline.saturating_duration_since(now))).await;
    };
    waited(e, &row.id, detail, timed_out, started)
}

/// Whether a question of the thread waits for the caller's answer (THREADBASE_UI=parent).
fn question_pending(e: &Engine, id: &ThreadId) -> Result<bool> {
    Ok(questions::pending_of(&e.store.read()?, id)?.is_some())
}

fn send_under_way(e: &Engine, id: &ThreadId) -> Result<bool> {
    commands::send_under_way(&e.store.read()?, id)
}
