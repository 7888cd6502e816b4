//! Rendered answers of still threads (closed, or live and idle) in `thread_snapshots`
//! (migration V8), so a list, or a poll of a closed thread, copies bytes instead of reading
//! the thread's events and output and shaping them again (issue 12: that was most of a listed
//! thread's cost). A busy thread is always rendered: its rows change with every event.
//!
//! It exists for speed alone, for DESIGN's targets "poll through serve ≤ 80 µs" and "list
//! `parent` (10) ≤ 120 µs" (the rows `serve/poll_{id,path,relative,name}` and
//! `serve/list_parent_10` of `benches/serve.rs`), which issue 26 holds to 1.2× of the
//! instructions they cost with it: without it, callgrind through a release serve counted poll
//! by id 230k instructions a request instead of 71k and list `parent` 1.36M instead of 217k
//! (trees of 1k and 10k, two runs each, 2026-12-04). A listed thread rendered costs about 130k
//! instructions; a kept one is a primary-key lookup and a copy. The list of all
//! (`serve/list_all`) reads kept answers too, but its memory and its one path do not depend
//! on the cache (`contract/list_answer.rs`).
//!
//! Reads take what is cached and render the rest (through contract/, as the filler does). What was missing is rendered
//! again later, off the request, by a filler on tokio's blocking pool, inside one write
//! transaction per batch: rendering and keeping in the same transaction means no change can
//! come between them, and V8's triggers delete a row on any later change of its thread. So a
//! cached answer is always the one the rows give now, and a read never waits for the filler.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::contract::list_answer::{self, Rendered};
use crate::contract::projection::{Detail, ThreadFacts};
use crate::contract::thread::poll_result;
use crate::domain::ThreadId;
use crate::error::{Error, Result};
use crate::store::facts::HostCheck;
use crate::store::snapshots::{self, View};
use crate::store::threads::{threads_by_ids, ThreadRow};
use crate::store::Conn;
use crate::store::Store;

/// Keys the filler renders in one write transaction (short, so other writes wait little).
const FILL_BATCH: usize = 64;
/// Keys waiting at most: beyond it misses are dropped (the next read notes them again), so a
/// cold list of a huge manager does not hold its ids in memory.
pub(super) const MAX_PENDING: usize = 16_384;

/// A view of one thread at one detail level.
pub(super) type Key = (ThreadId, View, Detail);

/// Renders `view` of `facts` at `detail` (contract/): the one function both the read paths and
/// the filler use, so a cached answer is byte for byte the answer a read would render.
pub(super) fn render(facts: &ThreadFacts, view: View, detail: Detail) -> Result<Rendered> {
    match view {
        View::Snapshot => list_answer::render_at(facts, detail),
        View::Poll => Ok(Rendered {
            json: {
                let mut json = Vec::with_capacity(8 * 1024);
                poll_result(&mut json, facts, detail)?;
                String::from_utf8(json).map_err(|e| Error::internal(e.to_string()))?
            },
            line: String::new(),
            live: facts.row.is_live(),
        }),
    }
}

/// One engine's cache of rendered answers and its filler.
pub(super) struct SnapshotCache {
    store: Arc<Store>,
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    keys: Vec<Key>,
    seen: HashSet<Key>,
    /// A filler is running (it takes every key noted until it stops).
    filling: bool,
}

impl SnapshotCache {
    pub(super) fn new(store: Arc<Store>) -> Arc<SnapshotCache> {
        Arc::new(SnapshotCache {
            store,
            pending: Mutex::new(Pending::default()),
        })
    }

    /// Notes views a read rendered because they were not cached; still threads (closed, or
    /// live and idle) among them are rendered and kept off the request. Outside a tokio runtime nothing is filled.
    pub(super) fn missed(self: &Arc<Self>, keys: impl IntoIterator<Item = Key>) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        for k in keys {
            if p.keys.len() >= MAX_PENDING {
                break;
            }
            if p.seen.insert(k.clone()) {
                p.keys.push(k);
            }
        }
        if p.filling || p.keys.is_empty() {
            return;
        }
        p.filling = true;
        drop(p);
        let this = self.clone();
        handle.spawn_blocking(move || this.fill());
    }

    /// Renders and keeps noted views, a batch per transaction, until none is left.
    fn fill(&self) {
        loop {
            let batch: Vec<Key> = {
                let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
                if p.keys.is_empty() {
                    p.filling = false;
                    p.seen = HashSet::new();
                    p.keys = Vec::new();
                    drop(p);
                    // An idle serve does not keep the pages of the burst.
                    self.store.trim_page_cache();
                    return;
                }
                let n = p.keys.len().min(FILL_BATCH);
                let batch: Vec<Key> = p.keys.drain(..n).collect();
                for k in &batch {
                    p.seen.remove(k);
                }
                batch
            };
            let hosts = HostCheck::of(self.store.hosts_to_check());
            if let Err(e) = self.store.write(|tx| fill_batch(tx, &batch, hosts)) {
                // The cache is an optimization: a failed fill leaves the rows to the read path.
                tracing::debug!(error = %e, "snapshot cache fill failed");
            }
        }
    }
}

/// Renders each key's view from the rows read in `tx` (a write transaction) and keeps it.
/// Returns how many were kept (busy or removed threads are skipped).
pub(super) fn fill_batch(tx: &Conn, keys: &[Key], hosts: HostCheck) -> Result<usize> {
    let mut ids: Vec<ThreadId> = keys.iter().map(|k| k.0.clone()).collect();
    ids.sort_unstable();
    ids.dedup();
    let rows: Vec<ThreadRow> = threads_by_ids(tx, &ids)?
        .into_iter()
        .filter(ThreadRow::is_still)
        .collect();
    let mut kept = 0;
    // Full detail retains more events than the others: read facts per detail level asked.
    for detail in [Detail::Summary, Detail::Tail, Detail::Full] {
        let wanted: Vec<ThreadRow> = rows
            .iter()
            .filter(|r| keys.iter().any(|k| k.2 == detail && k.0 == r.id))
            .cloned()
            .collect();
        if wanted.is_empty() {
            continue;
        }
        for f in crate::store::facts::of_threads(
            tx,
            wanted,
            crate::contract::projection::recent_event_count(detail),
            hosts,
        )? {
            // A live thread of an unreachable host is rendered saying so, and only while it
            // is: no row changes when its host comes back, so that answer is never kept.
            if f.pending.unreachable.is_some() {
                continue;
            }
            for view in [View::Snapshot, View::Poll] {
                // An isolated thread's poll text says what git finds in its worktree now
                // (issue 48), which no row records: that answer is never kept.
                if view == View::Poll && f.worktree.is_some() {
                    continue;
                }
                if !keys
                    .iter()
                    .any(|k| k.0 == f.row.id && k.1 == view && k.2 == detail)
                {
                    continue;
                }
                let r = render(&f, view, detail)?;
                let line = (view == View::Snapshot).then_some(r.line.as_str());
                if snapshots::put(tx, &f.row.id, view, detail.as_str(), &r.json, line)? {
                    kept += 1;
                }
            }
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ManagerId, Phase, ThreadStatus};
    use crate::store::events::{self, NewEvent};
    use crate::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec, NewThread};

    fn store_with_thread(status: &'static str) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("t.sqlite")).unwrap();
        store
            .write(|tx| {
                let m = upsert_manager(
                    tx,
                    &ManagerSpec::new(&"s".into(), Contract::Thread, "/root"),
                )?;
                insert_thread(
                    tx,
                    &NewThread {
                        id: "thread_a".into(),
                        manager_id: m,
                        path: "/root/a".into(),
                        parent_path: Some("/root".into()),
                        task_name: "a".into(),
                        name: "A".into(),
                        depth: 1,
                        cwd: "/w".into(),
                        status: ThreadStatus::Live,
                        phase: Phase::Busy,
                        ..Default::default()
                    },
                )?;
                events::append(
                    tx,
                    &"thread_a".into(),
                    &[NewEvent {
                        at: "2026-01-01T00:00:00.000Z",
                        kind: "assistant_message",
                        data: r#"{"text":"first"}"#,
                    }],
                )?;
                tx.sqlite().execute(
                    "INSERT INTO thread_output (thread_id, last_assistant_text) VALUES ('thread_a', 'first')",
                    [],
                )?;
                if status == "closed" {
                    tx.sqlite().execute(
                        "UPDATE threads SET status = 'closed', phase = 'idle', exit_kind = 'exited', exit_code = 0 WHERE id = 'thread_a'",
                        [],
                    )?;
                }
                Ok(())
            })
            .unwrap();
        (dir, store)
    }

    fn all_keys() -> Vec<Key> {
        let mut keys = Vec::new();
        for view in [View::Snapshot, View::Poll] {
            for detail in [Detail::Summary, Detail::Tail, Detail::Full] {
                keys.push(("thread_a".into(), view, detail));
            }
        }
        keys
    }

    fn cached_rows(store: &Store) -> i64 {
        store
            .read()
            .unwrap()
            .sqlite()
            .query_row("SELECT count(*) FROM thread_snapshots", [], |r| r.get(0))
            .unwrap()
    }

    /// What the filler keeps is what the read path renders, for every view and detail.
    #[test]
    fn a_kept_answer_is_the_rendered_answer() {
        let (_dir, store) = store_with_thread("closed");
        assert_eq!(
            store
                .write(|tx| fill_batch(tx, &all_keys(), HostCheck::Look))
                .unwrap(),
            6
        );
        let conn = store.read().unwrap();
        for (id, view, detail) in all_keys() {
            let row = crate::store::threads::thread_by_id_any(&conn, &id)
                .unwrap()
                .unwrap();
            let facts = crate::store::facts::of_threads(
                &conn,
                vec![row],
                crate::contract::projection::recent_event_count(detail),
                HostCheck::Look,
            )
            .unwrap();
            let want = render(&facts[0], view, detail).unwrap();
            let got = snapshots::cached(&conn, &id, view, detail.as_str()).unwrap();
            let line = (view == View::Snapshot).then(|| want.line.clone());
            assert_eq!(got, Some((want.json.clone(), line)), "{view:?} {detail:?}");
        }
    }

    /// A busy thread is never kept (it changes with every event); an idle live one is, until
    /// it is prompted again.
    #[test]
    fn a_busy_thread_is_never_kept_an_idle_one_until_it_changes() {
        let (_dir, store) = store_with_thread("live");
        assert_eq!(
            store
                .write(|tx| fill_batch(tx, &all_keys(), HostCheck::Look))
                .unwrap(),
            0
        );
        assert_eq!(cached_rows(&store), 0);
        let set_phase = |phase: &str| {
            store
                .write(|tx| {
                    tx.sqlite().execute(
                        "UPDATE threads SET phase = ?1 WHERE id = 'thread_a'",
                        [phase],
                    )?;
                    Ok(())
                })
                .unwrap()
        };
        set_phase("idle");
        assert_eq!(
            store
                .write(|tx| fill_batch(tx, &all_keys(), HostCheck::Look))
                .unwrap(),
            6
        );
        set_phase("busy");
        assert_eq!(
            cached_rows(&store),
            0,
            "a prompted thread kept its idle answers"
        );
    }

    /// Every kind of change to a thread's rows drops its kept answers in the same transaction.
    #[test]
    fn every_change_to_the_rows_drops_the_kept_answers() {
        type Change<'a> = &'a dyn Fn(&crate::store::Tx<'_>) -> Result<()>;
        let changes: [(&str, Change<'_>); 6] = [
            ("archive", &|tx| {
                tx.sqlite()
                    .execute("UPDATE threads SET archived = 1 WHERE id = 'thread_a'", [])?;
                Ok(())
            }),
            ("resume", &|tx| {
                tx.sqlite().execute(
                    "UPDATE threads SET status = 'live', phase = 'starting' WHERE id = 'thread_a'",
                    [],
                )?;
                Ok(())
            }),
            ("event", &|tx| {
                events::append(
                    tx,
                    &"thread_a".into(),
                    &[NewEvent {
                        at: "2026-01-01T00:00:01.000Z",
                        kind: "thread_archived",
                        data: "{}",
                    }],
                )?;
                Ok(())
            }),
            ("output", &|tx| {
                tx.sqlite().execute(
                    "UPDATE thread_output SET last_assistant_text = 'second' WHERE thread_id = 'thread_a'",
                    [],
                )?;
                Ok(())
            }),
            ("output removed", &|tx| {
                tx.sqlite()
                    .execute("DELETE FROM thread_output WHERE thread_id = 'thread_a'", [])?;
                Ok(())
            }),
            // The texts show the thread's spend (migration V10).
            ("usage", &|tx| {
                crate::store::usage::add(
                    tx,
                    &"thread_a".into(),
                    &crate::store::usage::Usage {
                        input_tokens: 10,
                        ..Default::default()
                    },
                    "2026-01-01T00:00:02.000Z",
                )
            }),
        ];
        for (what, change) in changes {
            let (_dir, store) = store_with_thread("closed");
            store
                .write(|tx| fill_batch(tx, &all_keys(), HostCheck::Look))
                .unwrap();
            assert_eq!(cached_rows(&store), 6, "{what}");
            store.write(|tx| change(tx)).unwrap();
            assert_eq!(cached_rows(&store), 0, "{what}: a stale answer was kept");
        }
        // A removed thread takes its answers with it.
        let (_dir, store) = store_with_thread("closed");
        store
            .write(|tx| fill_batch(tx, &all_keys(), HostCheck::Look))
            .unwrap();
        store
            .write(|tx| {
                tx.sqlite()
                    .execute("DELETE FROM threads WHERE id = 'thread_a'", [])?;
                Ok(())
            })
            .unwrap();
        assert_eq!(cached_rows(&store), 0);
    }

    /// Another build's rows (another shape) are never read.
    #[test]
    fn another_builds_answer_is_never_read() {
        let (_dir, store) = store_with_thread("closed");
        store
            .write(|tx| fill_batch(tx, &all_keys(), HostCheck::Look))
            .unwrap();
        store
            .write(|tx| {
                tx.sqlite()
                    .execute("UPDATE thread_snapshots SET shape = 'other'", [])?;
                Ok(())
            })
            .unwrap();
        let conn = store.read().unwrap();
        assert_eq!(
            snapshots::cached(&conn, &"thread_a".into(), View::Poll, "summary").unwrap(),
            None
        );
        // Nor does a list row carry it.
        let m: ManagerId = conn
            .sqlite()
            .query_row("SELECT manager_id FROM threads", [], |r| r.get(0))
            .unwrap();
        let mut carried = Vec::new();
        crate::store::list::each_row(&conn, m, &crate::store::list::ListQuery::default(), |r| {
            carried.push(r.kept()?.map(|(json, _)| json));
            Ok(true)
        })
        .unwrap();
        assert_eq!(carried, vec![None]);
    }
}
