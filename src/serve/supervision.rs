//! Supervision never silently stops (issue 46). A serve's row watcher (`watcher`) carries out
//! what other processes ask of this serve through rows (a `threadbase stop` from another host,
//! a send from an ancestor's serve), delivers its caller's notices and writes its heartbeat.
//! On PostgreSQL the watcher needs a connection of its own, and the heartbeat a working writer:
//! when either cannot be had (the server's `max_connections`, a role's `CONNECTION LIMIT`, a
//! restart), the watcher retries with a backoff ([`retry`]) until it holds one, and
//! meanwhile this serve is *degraded*: [`Supervision`] records what is not running, since when
//! and why, every answer of this serve is preceded by a `supervision` notification saying so
//! ([`SupervisionNotice`], `docs/serve-protocol.md`), and the heartbeat row records it for
//! `threadbase host list` while the writer still works.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::store::hosts::Degraded;
use crate::time::Backoff;

/// What of a serve's supervision is not running, and since when. Shared by the watcher, which
/// records it, and the requests, which read it (one atomic load while all runs).
#[derive(Debug, Default)]
pub struct Supervision {
    /// Whether anything is not running: the requests' fast check.
    degraded: AtomicBool,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The row watcher holds no connection to the database.
    feed: Option<Degraded>,
    /// The heartbeat cannot be written.
    heartbeat: Option<Degraded>,
}

/// Which part of the supervision a change is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The row watcher's connection (the change feed: commands, notices, contract B's rows).
    Feed,
    /// The heartbeat (this serve's row in `host_serves`, its host's lease).
    Heartbeat,
}

impl Supervision {
    /// `part` failed with `reason`. Returns whether it was running until now (so the caller
    /// says so once, and the heartbeat records it at once). A later failure keeps the first's
    /// `since` and takes the newer reason.
    pub fn failed(&self, part: Part, reason: &str) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let slot = state.slot(part);
        let newly = slot.is_none();
        let since = slot
            .take()
            .map(|d| d.since)
            .unwrap_or_else(crate::time::now_iso);
        *slot = Some(Degraded {
            since,
            reason: reason.to_string(),
        });
        self.degraded.store(true, Ordering::Release);
        newly
    }

    /// `part` runs again. Returns what it recorded while it did not (`None`: it was running).
    pub fn running(&self, part: Part) -> Option<Degraded> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let was = state.slot(part).take();
        let any = state.feed.is_some() || state.heartbeat.is_some();
        self.degraded.store(any, Ordering::Release);
        was
    }

    /// What the heartbeat row records: whether the row watcher holds no connection, since when
    /// and why (a heartbeat that is being written needs no word about the heartbeat).
    pub fn mark(&self) -> Option<Degraded> {
        if !self.degraded.load(Ordering::Acquire) {
            return None;
        }
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.feed.clone()
    }

    /// The note every answer carries while something is not running (`None` while all runs).
    pub fn note(&self) -> Option<Note> {
        if !self.degraded.load(Ordering::Acquire) {
            return None;
        }
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        Note::of(&state)
    }
}

impl State {
    fn slot(&mut self, part: Part) -> &mut Option<Degraded> {
        match part {
            Part::Feed => &mut self.feed,
            Part::Heartbeat => &mut self.heartbeat,
        }
    }
}

/// What a degraded serve says with each answer: since when (the earliest of what is not
/// running, by this serve's clock), why, and the whole of it in words with a `Repair:`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Note {
    /// Always false: a note is sent only while supervision is not running.
    pub running: bool,
    pub since: String,
    /// The connection's error (the watcher's, else the heartbeat's).
    pub reason: String,
    /// What is not running: `watcher`, `heartbeat`, or both.
    pub parts: Vec<&'static str>,
    pub text: String,
}

impl Note {
    fn of(state: &State) -> Option<Note> {
        let mut parts = Vec::new();
        let mut what = Vec::new();
        if state.feed.is_some() {
            parts.push("watcher");
            what.push("its row watcher holds no database connection, so what other processes ask of this serve through rows (a `threadbase stop` from another host, a send or resume from another serve) is not carried out and notices for this session wait in the database");
        }
        if state.heartbeat.is_some() {
            parts.push("heartbeat");
            what.push(
                "its heartbeat cannot be written, so its host reads as unreachable once its lease (30 s) runs out unless another serve of the host beats",
            );
        }
        let first = [&state.feed, &state.heartbeat]
            .into_iter()
            .flatten()
            .min_by(|a, b| a.since.cmp(&b.since))?;
        let reason = state
            .feed
            .as_ref()
            .or(state.heartbeat.as_ref())
            .map(|d| d.reason.clone())
            .unwrap_or_default();
        let text = format!(
            "threadbase: supervision is not running in this serve (pid {}) since {}: {}. This answer is otherwise complete; the serve retries on its own (0.5 s, doubling to 10 s) and carries out what waited once it holds a connection. Cause: {}. Repair: free PostgreSQL connections (raise the server's max_connections or the role's CONNECTION LIMIT, or end sessions that are not needed: docs/configuration.md sizes them); `threadbase host list` shows the degraded serves.",
            std::process::id(),
            first.since,
            what.join("; and "),
            reason.trim_end_matches('.')
        );
        Some(Note {
            running: false,
            since: first.since.clone(),
            reason,
            parts,
            text,
        })
    }
}

/// The `supervision` notification that precedes each answer of a degraded serve:
/// `{"method": "supervision", "params": {"requestId", "running": false, "since", "reason",
/// "parts", "text"}}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SupervisionNotice<'a> {
    pub request_id: &'a Value,
    #[serde(flatten)]
    pub note: Note,
}

/// The first retry's delay of the row watcher and the heartbeat.
pub const RETRY_FIRST: Duration = Duration::from_millis(500);
/// The row watcher's longest delay between tries.
pub const FEED_CAP: Duration = Duration::from_secs(10);

/// The watcher's and the heartbeat's retries: [`RETRY_FIRST`] after the first failure,
/// doubling up to `cap`.
pub fn retry(cap: Duration) -> Backoff {
    Backoff::new(RETRY_FIRST, cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backoff_doubles_from_half_a_second_to_its_cap_and_starts_over_after_a_success() {
        let mut b = retry(FEED_CAP);
        let delays: Vec<u64> = (0..7).map(|_| b.failed().as_millis() as u64).collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 8000, 10000, 10000]);
        b.reset();
        assert_eq!(b.failed(), Duration::from_millis(500));
        let mut beat = retry(Duration::from_secs(5));
        let delays: Vec<u64> = (0..5).map(|_| beat.failed().as_millis() as u64).collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 5000]);
    }

    #[test]
    fn a_serve_is_degraded_while_a_part_fails_and_keeps_since_when_across_failures() {
        let s = Supervision::default();
        assert!(s.note().is_none() && s.mark().is_none());
        assert!(s.failed(Part::Feed, "too many connections for role \"x\""));
        let since = s.note().unwrap().since;
        // A second failure is not news, keeps the first's time and takes the newer reason.
        assert!(!s.failed(Part::Feed, "the server closed the connection"));
        let note = s.note().unwrap();
        assert_eq!(note.since, since);
        assert_eq!(note.reason, "the server closed the connection");
        assert_eq!(note.parts, ["watcher"]);
        assert!(!note.running);
        assert!(
            note.text.contains("supervision is not running")
                && note
                    .text
                    .contains("row watcher holds no database connection")
                && note.text.contains("Repair:"),
            "{}",
            note.text
        );
        assert_eq!(s.mark().unwrap().since, since);
        // The heartbeat fails too: both are said; the row records the watcher's.
        assert!(s.failed(Part::Heartbeat, "connection refused"));
        assert_eq!(s.note().unwrap().parts, ["watcher", "heartbeat"]);
        assert_eq!(s.mark().unwrap().reason, "the server closed the connection");
        // The watcher holds a connection again: only the heartbeat is said, and nothing is
        // left for the row to record.
        assert_eq!(s.running(Part::Feed).unwrap().since, since);
        assert_eq!(s.note().unwrap().parts, ["heartbeat"]);
        assert!(s.mark().is_none());
        assert!(s.running(Part::Heartbeat).is_some());
        assert!(s.note().is_none());
        assert!(s.running(Part::Feed).is_none(), "was running");
    }
}
