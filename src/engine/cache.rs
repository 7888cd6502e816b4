//! Answers this serve rendered, kept in its memory while the database has not changed since
//! (issue 47): a poll of a closed thread, and the list snapshots of still threads (closed, or
//! live and idle), are copied instead of read and shaped again. A busy thread is always
//! rendered: its rows change with every event.
//!
//! It exists for speed alone, for DESIGN's targets "poll through serve ≤ 80 µs", "list
//! `parent` (10) ≤ 120 µs" and "a settled thread's single poll on PostgreSQL ≤ 1.5× SQLite's"
//! (the rows `serve/poll_{id,path,relative,name}`, `serve/list_parent_10` and
//! `serve_pg/poll_id` of `benches/serve.rs`): rendering a listed thread costs about 130k
//! instructions, a kept one a hash lookup and a copy, and a kept poll on PostgreSQL no round
//! trip at all.
//!
//! What makes a kept answer current is the database's change feed, read without a statement
//! to the server: every entry carries the [`Stamp`] read before the rows it was rendered from,
//! and it is served only while the stamp is still the same. The stamp is this process's
//! commits ([`Store::commits`], moved right after each commit) with the change counter of a
//! connection apart ([`ChangeWatch`]: SQLite's `PRAGMA data_version` on its own connection,
//! which moves on every commit of any connection or process; on PostgreSQL the count of
//! `threadbase_changes` notifications the serve's row watcher already listens to
//! ([`Store::shared_changes`], no connection of its own), which every writing transaction of
//! any process sends, and which jumps when the listening connection is reopened). So any
//! change, by this serve, another serve, a CLI command or a child's events, drops every kept
//! answer, and no table needs a trigger. On PostgreSQL another process's commit is seen once
//! its notification arrived: with its commit (on loopback, well under a millisecond after
//! it), or, for the facts children report, within `store::postgres::store::ANNOUNCE_AFTER`
//! (100 ms); SQLite's counter is exact. While the watch cannot be read (a lost server, a
//! degraded row watcher), nothing is kept or served.
//!
//! Reads never write: nothing here touches the database but the change counter's read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::contract::list_answer::Rendered;
use crate::contract::projection::{Detail, ThreadFacts};
use crate::contract::thread::poll_result;
use crate::domain::ThreadId;
use crate::error::{Error, Result};
use crate::store::{ChangeWatch, Store};

/// Bytes of JSON kept at most: past it, answers are served fresh and not kept (a list of every
/// thread of a big tree renders the rest each time) until the next change drops them all.
pub(super) const MAX_BYTES: usize = 24 << 20;

/// What an answer is kept under.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Key {
    /// A poll by this reference (as the request spelled it) at a detail level: the reference's
    /// resolution is a function of the rows too.
    Poll(String, Detail),
    /// A thread's list snapshot (summary) and list line.
    Listed(ThreadId),
}

/// Where the database's changes stood: equal stamps, no change in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    commits: u64,
    version: i64,
}

/// One serve's kept answers.
pub(super) struct Answers {
    store: Arc<Store>,
    /// The connection whose counter moves with every commit (opened on first use).
    watch: Mutex<Option<ChangeWatch>>,
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    /// What every entry was rendered at; `None`: nothing kept.
    at: Option<Stamp>,
    map: HashMap<Key, Rendered>,
    bytes: usize,
}

/// Renders a poll's result of `facts` at `detail` into a string (contract/, as an answer not
/// kept is written): what a kept poll copies.
pub(super) fn render_poll(facts: &ThreadFacts, detail: Detail) -> Result<Rendered> {
    let mut json = Vec::with_capacity(8 * 1024);
    poll_result(&mut json, facts, detail)?;
    Ok(Rendered {
        json: String::from_utf8(json).map_err(|e| Error::internal(e.to_string()))?,
        line: String::new(),
        live: facts.row.is_live(),
    })
}

/// Whether a rendering of `facts` is a function of rows alone, so it can be kept: a closed
/// thread, or (a list's snapshot) a live idle one. Never a thread held on a host whose lease
/// ran out (no row changes when it comes back), nor a poll of an isolated thread (its text
/// says what git finds in its worktree now, issue 48).
pub(super) fn keepable(facts: &ThreadFacts, poll: bool) -> bool {
    let still = if poll {
        !facts.row.is_live() && facts.worktree.is_none()
    } else {
        facts.row.is_still()
    };
    still && facts.pending.unreachable.is_none()
}

impl Answers {
    pub(super) fn new(store: Arc<Store>) -> Answers {
        Answers {
            store,
            watch: Mutex::new(None),
            kept: Mutex::default(),
        }
    }

    /// Where the database's changes stand now; `None` when the change counter cannot be read
    /// (nothing is served from memory then). Read it before the rows an answer is rendered
    /// from.
    pub(super) fn stamp(&self) -> Option<Stamp> {
        let commits = self.store.commits();
        // PostgreSQL: the row watcher's count of notifications, never a connection of its
        // own (nothing is kept while the watcher holds none).
        if let Some(shared) = self.store.shared_changes() {
            return shared.map(|version| Stamp { commits, version });
        }
        let mut watch = self.watch.lock().unwrap_or_else(|p| p.into_inner());
        if watch.is_none() {
            *watch = self.store.change_watch().ok();
        }
        let version = match watch.as_mut()?.version() {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(error = %e, "the change counter cannot be read; answers are not kept");
                *watch = None;
                return None;
            }
        };
        Some(Stamp { commits, version })
    }

    /// The answer kept under `key`, if the database did not change since it was rendered.
    pub(super) fn get(&self, key: &Key, now: Option<Stamp>) -> Option<Rendered> {
        let now = now?;
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.at != Some(now) {
            // Everything kept is out of date: free it now.
            if kept.at.is_some() {
                *kept = Kept::default();
            }
            return None;
        }
        kept.map.get(key).cloned()
    }

    /// Keeps `answer`, rendered from rows read after `at` was read, under `key` (while it fits).
    pub(super) fn put(&self, key: Key, answer: &Rendered, at: Option<Stamp>) {
        let Some(at) = at else {
            return;
        };
        let mut kept = self.kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.at != Some(at) {
            // Entries of another stamp are never served with this one: start over. (An answer
            // rendered at an older stamp than the entries only costs their hits.)
            *kept = Kept {
                at: Some(at),
                ..Kept::default()
            };
        }
        let size = answer.json.len() + answer.line.len();
        if kept.bytes + size > MAX_BYTES {
            return;
        }
        if let Some(old) = kept.map.insert(key, answer.clone()) {
            kept.bytes -= old.json.len() + old.line.len();
        }
        kept.bytes += size;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Phase, ThreadStatus};
    use crate::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec, NewThread};

    fn store() -> (tempfile::TempDir, Arc<Store>) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(Store::open(dir.path().join("t.sqlite")).unwrap());
        (dir, store)
    }

    fn answer(text: &str) -> Rendered {
        Rendered {
            json: text.into(),
            line: String::new(),
            live: false,
        }
    }

    fn add_thread(store: &Store, id: &str) {
        store
            .write(|tx| {
                let m = upsert_manager(
                    tx,
                    &ManagerSpec::new(&"s".into(), Contract::Thread, "/root"),
                )?;
                insert_thread(
                    tx,
                    &NewThread::under_root(id, m, ThreadStatus::Live, Phase::Idle),
                )?;
                Ok(())
            })
            .unwrap();
    }

    /// A kept answer is served while nothing changed, and dropped by this process's commit
    /// and by another connection's.
    #[test]
    fn any_commit_drops_what_was_kept() {
        let (dir, store) = store();
        let answers = Answers::new(store.clone());
        let key = Key::Poll("a".into(), Detail::Summary);
        let at = answers.stamp();
        assert!(at.is_some());
        answers.put(key.clone(), &answer("one"), at);
        assert_eq!(answers.get(&key, answers.stamp()).unwrap().json, "one");
        // This process's write.
        add_thread(&store, "thread_000000000001");
        assert_eq!(answers.get(&key, answers.stamp()), None);
        // Another connection's (another process, for SQLite's counter).
        let at = answers.stamp();
        answers.put(key.clone(), &answer("two"), at);
        assert_eq!(answers.get(&key, answers.stamp()).unwrap().json, "two");
        let other = rusqlite::Connection::open(dir.path().join("t.sqlite")).unwrap();
        other
            .execute("UPDATE threads SET name = 'renamed'", [])
            .unwrap();
        assert_eq!(answers.get(&key, answers.stamp()), None);
        // An answer rendered before a change is not kept under the newer stamp.
        answers.put(key.clone(), &answer("old"), at);
        assert_eq!(answers.get(&key, answers.stamp()), None);
    }

    /// Past [`MAX_BYTES`] nothing more is kept.
    #[test]
    fn the_memory_is_bounded() {
        let (_dir, store) = store();
        let answers = Answers::new(store);
        let at = answers.stamp();
        let big = answer(&"x".repeat(MAX_BYTES / 2 + 1));
        answers.put(Key::Poll("a".into(), Detail::Summary), &big, at);
        answers.put(Key::Poll("b".into(), Detail::Summary), &big, at);
        assert!(answers
            .get(&Key::Poll("a".into(), Detail::Summary), at)
            .is_some());
        assert_eq!(
            answers.get(&Key::Poll("b".into(), Detail::Summary), at),
            None
        );
        let kept = answers.kept.lock().unwrap();
        assert!(kept.bytes <= MAX_BYTES);
    }
}
