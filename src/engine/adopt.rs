//! Adoption (contract A, issue 28): a thread belongs to the Pi session that started it, and a
//! new `pi` cannot reach it. When that session is gone (its serve is not running), another
//! session may take the thread over: `threadbase adopt REF` from a shell, or a `resume` of the
//! thread's exact id or canonical path from the new session. A thread whose session's serve is
//! alive is never adopted: that session still answers for it.

use crate::domain::{ManagerId, ThreadId};
use crate::error::{Error, ErrorCode, Result};
use crate::runtime::signals::ProcessIdentity;
use crate::store::adopt::{self, Adopted, Candidate};
use crate::store::Store;
use crate::time::now_iso;

/// What a reference found among other sessions' threads.
#[derive(Debug)]
pub enum Found {
    /// No other session's thread has that id or canonical path.
    Nothing,
    /// The one thread it names belongs to a session whose serve is alive.
    OwnerAlive(Candidate),
    /// It was adopted.
    Adopted(Adopted),
}

/// Adopts the one thread of another session that `reference` names exactly (its id, or a
/// canonical path only one gone session's thread has) under manager `to`. A thread whose row
/// is still live because its serve died without closing it is closed as stale first (the
/// restore pass, as the next serve would). `me` is the calling process (never counted as a
/// live owner); `by` is recorded in the event. `check` runs on the one thread found before
/// anything is written: its error refuses the adoption, which then changes nothing (a resume
/// that cannot launch the thread leaves it where it was).
pub fn adopt_reference(
    store: &Store,
    me: ProcessIdentity,
    reference: &str,
    to: Option<ManagerId>,
    target: impl Fn(&crate::store::Tx<'_>) -> Result<ManagerId>,
    check: impl FnOnce(&ThreadId) -> Result<()>,
    by: &str,
) -> Result<Found> {
    let found = adopt::candidates(&store.read()?, reference, to)?;
    let alive = |c: &Candidate| {
        let recorded = crate::identity::Owner::recorded(
            c.owner_pid,
            c.owner_started_at,
            c.owner_host.as_deref(),
            c.owner_boot.as_deref(),
        );
        crate::identity::holder(recorded, me).elsewhere().is_some()
    };
    let (gone, held): (Vec<Candidate>, Vec<Candidate>) = found.into_iter().partition(|c| !alive(c));
    let one = match (gone.len(), held.into_iter().next()) {
        (0, None) => return Ok(Found::Nothing),
        (0, Some(c)) => return Ok(Found::OwnerAlive(c)),
        (1, _) => gone.into_iter().next().expect("one"),
        _ => return Err(ambiguous(reference, &gone)),
    };
    check(&one.id)?;
    // A row its dead serve left live: closed as stale first, as any serve's start would (a
    // watcher does it within a second anyway; a closed thread needs no pass at all).
    if one.status == crate::domain::ThreadStatus::Live {
        crate::engine::restore_dead_owners(store, me)?;
    }
    let adopted = store.write(|tx| {
        let to = target(tx)?;
        adopt::adopt(tx, &one.id, to, by, &now_iso())
    })?;
    Ok(Found::Adopted(adopted))
}

/// Several gone sessions' threads have that canonical path: named by session, start and file.
fn ambiguous(reference: &str, gone: &[Candidate]) -> Error {
    let items: Vec<String> = gone
        .iter()
        .map(|c| {
            format!(
                "{} (started {}, Pi session {}{})",
                c.id,
                c.created_at,
                c.session_id,
                c.session_file
                    .as_deref()
                    .map(|f| format!(", file {f}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    Error::new(
        ErrorCode::AmbiguousReference,
        format!(
            "{reference} names a thread in {} ended Pi sessions: {}. Repair: adopt one by its thread id.",
            gone.len(),
            items.join("; ")
        ),
    )
}

/// The refusal for a thread whose session's serve is running.
pub fn owner_alive(c: &Candidate, path: &str) -> Error {
    let how = match c.session_file.as_deref() {
        Some(f) => format!("continue it in that session (`pi --session {f}`)"),
        None => "continue it in that session (`pi --resume` lists sessions)".to_string(),
    };
    Error::new(
        ErrorCode::Conflict,
        format!(
            "{path} ({}) belongs to Pi session {}, whose serve is running (pid {}): a thread is adopted only from a session that has ended. Repair: {how}, or end that Pi session first.",
            c.id,
            c.session_id,
            c.owner_pid.unwrap_or_default()
        ),
    )
}
