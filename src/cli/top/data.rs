//! Top's rows: every thread, or one subtree read as one index range per manager
//! (`paths::descendant_range`, as list's `ancestor` reads it) so a narrow view of a big
//! database reads only its rows; with them each thread's place in its tree and what it
//! spent, and one thread's detail. Kept apart from drawing so the reads are tested alone.

use std::collections::HashMap;

use serde_json::Value;

use crate::contract::projection::{self, Detail};
use crate::domain::{AgentState, Contract, ExitKind, Outcome, Phase, ThreadId, ThreadStatus};
use crate::engine::budget::usd;
use crate::error::Result;
use crate::store::hosts::Placements;
use crate::store::list::{StateFilter, VisibilityFilter};
use crate::store::top::{self, TopRow};
use crate::store::{events, threads::thread_by_id_any, usage, Conn};

/// One thread as the tree shows it.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) id: String,
    pub(super) session: String,
    pub(super) contract: Contract,
    pub(super) path: String,
    pub(super) task_name: String,
    pub(super) name: String,
    status: ThreadStatus,
    phase: Phase,
    agent_state: Option<AgentState>,
    exit_kind: Option<ExitKind>,
    /// The exit's code, and whether a signal ended it.
    exit_code: Option<i64>,
    signalled: bool,
    /// What needs the user (issue 45: the view `thread_attention`, seen from this host: a
    /// serve of this host whose pid is gone is `owner_gone` at once); nothing is written.
    pub(super) need: Option<crate::store::attention::Need>,
    /// The host that holds (or held) it, when recorded (issue 33).
    pub(super) host: Option<String>,
    /// Live on a host whose lease ran out: since when (its last heartbeat).
    pub(super) unreachable_since: Option<String>,
    archived: bool,
    hidden: bool,
    pub(super) created_at: String,
    pub(super) last_event_at: String,
    pub(super) owner: Option<crate::identity::Owner>,
    /// Every token the thread's messages used, and their cost.
    pub(super) tokens: i64,
    pub(super) cost_usd: f64,
    /// The root session of the whole tree it belongs to, across managers (V4's places).
    pub(super) root: Option<String>,
    /// The thread it hangs under in that tree (possibly in another manager).
    pub(super) forest_parent: Option<String>,
    /// A contract C worker's run outcome and report verdict (its list status).
    outcome: Option<Outcome>,
    verdict: Option<String>,
}

impl Row {
    pub(super) fn live(&self) -> bool {
        self.status == ThreadStatus::Live
    }

    /// List's state and visibility filters, where a hidden contract C worker counts as
    /// archived.
    pub(super) fn passes(&self, state: StateFilter, visibility: VisibilityFilter) -> bool {
        state.keeps(self.live()) && visibility.keeps(self.archived || self.hidden)
    }

    /// Live, and its owning serve is gone.
    pub(super) fn owner_gone(&self) -> bool {
        self.live()
            && self
                .need
                .as_ref()
                .is_some_and(|n| n.attention == crate::domain::Attention::OwnerGone)
    }

    pub(super) fn state_text(&self) -> String {
        if self.unreachable_since.is_some() && self.live() {
            // The detail's poll says since when and what to do.
            return "live/host unreachable".to_string();
        }
        if let Some(n) = self.need.as_ref().filter(|_| self.live()) {
            return format!("live/{}", n.word());
        }
        match (self.contract, self.agent_state) {
            (Contract::Agent, Some(s)) => return s.to_string(),
            (Contract::Worker, _) => {
                // The status the original's terminal UI lists (not part of threads_list).
                return crate::contract::worker::list_status(
                    self.status,
                    self.phase,
                    self.verdict.as_deref(),
                    self.outcome,
                )
                .to_string();
            }
            (Contract::Thread | Contract::Agent, _) => {}
        }
        crate::domain::state_words(
            self.status,
            self.phase,
            self.exit_kind,
            self.exit_code,
            self.signalled,
            self.need.as_ref().map(|n| n.attention),
        )
    }
}

/// What [`load_rows`] read.
#[derive(Debug, Default)]
pub(super) struct Loaded {
    /// The rows of the subtree, every manager's in list order.
    pub(super) rows: Vec<Row>,
    /// Every thread's forest parent, read or not, so the tree walks past a parent outside
    /// the subtree or dropped by a filter.
    pub(super) forest_parents: HashMap<String, String>,
    /// The database knows a host other than this one: the tree shows a HOST column.
    pub(super) team: bool,
}

/// The thread at `subtree` and every thread below it, in every manager (every thread when it
/// is empty; a trailing `/` is ignored), with their places and what they spent. A subtree is
/// one index range per manager (sql/top_threads_under.sql), not a read of every row.
pub(super) fn load_rows(conn: &Conn, subtree: &str) -> Result<Loaded> {
    let mut rows: Vec<Row> = top::rows(conn, subtree)?
        .into_iter()
        .map(Row::from)
        .collect();
    let mut forest_parents = HashMap::new();
    if usage::has_tables(conn)? {
        let places = top::places(conn)?;
        for r in &mut rows {
            if let Some((root, parent)) = places.get(&r.id) {
                r.root = Some(root.clone());
                r.forest_parent = parent.clone();
            }
        }
        forest_parents = places
            .into_iter()
            .filter_map(|(id, (_, parent))| Some((id, parent?)))
            .collect();
    }
    let spent = usage::all_if_any(conn)?;
    for r in &mut rows {
        if let Some(u) = spent.get(&r.id) {
            r.tokens = u.total_tokens();
            r.cost_usd = u.cost_usd;
        }
    }
    // Where each is held (issue 33): a row of another host is never "owner gone" here (its
    // pid means nothing on this host), and one of a host whose lease ran out says so.
    let placements = Placements::read(conn)?;
    for r in &mut rows {
        r.host = placements.host_of(&r.id).map(str::to_string);
        r.need = placements.need_of(&crate::store::hosts::ThreadRowRef {
            id: &r.id,
            live: r.live(),
            owner_pid: r.owner.map(|o| o.pid),
            owner_started_at: r.owner.map(|o| o.started_at),
            last_event_at: Some(&r.last_event_at),
        });
        r.unreachable_since = placements
            .unreachable_since(&r.id, r.live())
            .map(str::to_string);
        if r.unreachable_since.is_none() {
            if let Some(host) = r.host.as_deref() {
                r.owner = r.owner.and_then(|o| {
                    crate::identity::Owner::recorded(
                        Some(o.pid),
                        Some(o.started_at),
                        Some(host),
                        None,
                    )
                });
            }
        }
    }
    Ok(Loaded {
        rows,
        forest_parents,
        team: placements.team(),
    })
}

impl From<TopRow> for Row {
    fn from(r: TopRow) -> Row {
        Row {
            id: r.id,
            session: r.session,
            contract: r.contract,
            path: r.path,
            task_name: r.task_name,
            name: r.name,
            status: r.status,
            phase: r.phase,
            agent_state: r.agent_state,
            exit_kind: r.exit_kind,
            archived: r.archived,
            hidden: r.hidden,
            created_at: r.created_at,
            last_event_at: r.last_event_at,
            owner: r.owner_started_at.and_then(|_| {
                crate::identity::Owner::recorded(r.owner_pid, r.owner_started_at, None, None)
            }),
            tokens: 0,
            cost_usd: 0.0,
            root: None,
            forest_parent: None,
            outcome: r.outcome,
            verdict: r.verdict,
            exit_code: r.exit_code,
            signalled: r.signalled,
            need: None,
            host: None,
            unreachable_since: None,
        }
    }
}

/// The `poll` projection of one thread at `tail` detail.
pub(super) fn thread_snapshot(conn: &Conn, id: &ThreadId) -> Result<Option<Value>> {
    let Some(row) = thread_by_id_any(conn, id)? else {
        return Ok(None);
    };
    let out = crate::store::output::of_thread(conn, id)?;
    let evs = events::rows_of_thread(conn, id)?;
    // What it waits for (a slot in the queue, an answer to its question) is shown too.
    let pending = crate::store::facts::pending_of(conn, &row)?;
    let facts = projection::ThreadFacts {
        row,
        out,
        events: evs,
        usage: Default::default(),
        pending,
        attention: crate::store::attention::of_thread_checked(conn, id)?,
        worktree: crate::store::worktrees::of_thread_checked(conn, id)?
            .map(|row| crate::store::facts::WorktreeFacts { row, stat: None }),
    };
    Ok(Some(serde_json::to_value(
        projection::Projection::new(&facts, Detail::Tail).snapshot(),
    )?))
}

/// What the thread spent, and its subtree across every manager of its tree: a line each.
pub(super) fn usage_text(conn: &Conn, id: &ThreadId) -> Vec<String> {
    let mut out = Vec::new();
    if !usage::has_tables(conn).unwrap_or(false) {
        return out;
    }
    if let Ok(Some(u)) = usage::of_thread(conn, id) {
        out.push(format!("usage: {}", crate::cli::usage::summary(&u)));
    }
    if let Ok(Some(s)) = usage::of_subtree(conn, id) {
        out.push(format!(
            "subtree: {} thread{} · {} tokens · {}",
            s.threads,
            if s.threads == 1 { "" } else { "s" },
            crate::engine::budget::thousands(s.usage.total_tokens()),
            usd(s.usage.cost_usd)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ManagerId, Phase, SessionId, ThreadId, ThreadStatus};
    use crate::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec, NewThread};

    fn manager(tx: &crate::store::Tx<'_>, session: &str, contract: Contract) -> Result<ManagerId> {
        upsert_manager(
            tx,
            &ManagerSpec::new(&SessionId::new(session), contract, "/root"),
        )
    }

    /// A subtree read as an index range, then list's state and visibility filters, keep
    /// exactly the rows, in order, that top kept when it read every row and filtered them in
    /// memory: the thread at the path and below it in every manager (a trailing `/` ignored,
    /// `!` never in a path), a hidden worker counted as archived.
    #[test]
    fn subtree_range_and_filters_keep_what_the_in_memory_filter_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path().join("t.sqlite")).unwrap();
        let paths = [
            "/root",
            "/root/a",
            "/root/a_b",
            "/root/a/x",
            "/root/a/x/y",
            "/root/ab",
            "/root/a_b/z",
            "/k",
            "/k/a",
        ];
        store
            .write(|tx| {
                for session in ["ses_one", "ses_two"] {
                    let m = manager(tx, session, Contract::Thread)?;
                    for (i, path) in paths.into_iter().enumerate() {
                        insert_thread(
                            tx,
                            &NewThread {
                                id: ThreadId::new(format!("{session}_{i}")),
                                manager_id: m,
                                path: path.into(),
                                parent_path: crate::paths::parent_path(path).map(str::to_string),
                                task_name: crate::paths::basename(path).into(),
                                name: path.into(),
                                cwd: "/w".into(),
                                status: ThreadStatus::Live,
                                phase: Phase::Idle,
                                ..Default::default()
                            },
                        )?;
                    }
                }
                tx.sqlite().unwrap().execute_batch(
                    "UPDATE threads SET status = 'closed', exit_kind = 'exited' WHERE rowid % 2 = 0;
                     UPDATE threads SET archived = 1 WHERE rowid % 3 = 0;
                     UPDATE threads SET hidden = 1 WHERE rowid % 5 = 0;
                     UPDATE threads SET hidden = 0 WHERE rowid % 7 = 0;",
                )?;
                Ok(())
            })
            .unwrap();
        let conn = store.read().unwrap();
        let facts: HashMap<String, (bool, bool, String)> = crate::store::rows_as_text(
            &conn,
            "SELECT id, status = 'live', archived = 1 OR hidden IS 1, path FROM threads",
        )
        .unwrap()
        .into_iter()
        .map(|line| {
            let cells: Vec<&str> = line.split('|').collect();
            (
                cells[0].to_string(),
                (
                    cells[1] == "Integer(1)",
                    cells[2] == "Integer(1)",
                    cells[3].to_string(),
                ),
            )
        })
        .collect();
        let kept = |subtree: &str, state, visibility| -> Vec<String> {
            let rows = load_rows(&conn, subtree).unwrap().rows;
            let rows = rows.into_iter().filter(|r| r.passes(state, visibility));
            rows.map(|r| r.id).collect()
        };
        let every = kept("", StateFilter::All, VisibilityFilter::All);
        assert_eq!(every.len(), 2 * paths.len());
        let subtrees = [
            "",
            "/",
            "/root",
            "/root/",
            "/root/a",
            "/root/a/",
            "/root/a_b",
            "/root/a!b",
            "/root/a/x",
            "/k",
            "/none",
            "root",
        ];
        for state in [StateFilter::All, StateFilter::Live, StateFilter::Closed] {
            for visibility in [
                VisibilityFilter::Active,
                VisibilityFilter::Archived,
                VisibilityFilter::All,
            ] {
                for subtree in subtrees {
                    // What top kept when it read every row and filtered them in memory.
                    let visible = |id: &&String| {
                        let (live, hidden, path) = &facts[*id];
                        let state_ok = match state {
                            StateFilter::All => true,
                            StateFilter::Live => *live,
                            StateFilter::Closed => !live,
                        };
                        let vis_ok = match visibility {
                            VisibilityFilter::Active => !hidden,
                            VisibilityFilter::Archived => *hidden,
                            VisibilityFilter::All => true,
                        };
                        let sub = subtree.trim_end_matches('/');
                        let sub_ok = sub.is_empty()
                            || path == sub
                            || (path.starts_with(sub)
                                && path.as_bytes().get(sub.len()) == Some(&b'/'));
                        state_ok && vis_ok && sub_ok
                    };
                    let want: Vec<String> = every.iter().filter(visible).cloned().collect();
                    assert_eq!(
                        kept(subtree, state, visibility),
                        want,
                        "{subtree} {state:?} {visibility:?}"
                    );
                }
            }
        }
    }

    /// A contract C worker's row shows the list status the original's terminal UI shows
    /// (threads_list itself returns only `{workers}`); other contracts keep theirs.
    #[test]
    fn worker_rows_show_their_list_status() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path().join("t.sqlite")).unwrap();
        store
            .write(|tx| {
                let m = manager(tx, "ses_coord", Contract::Worker)?;
                for (id, status, phase) in [
                    ("ses_busy", ThreadStatus::Live, Phase::Busy),
                    ("ses_new", ThreadStatus::Live, Phase::Starting),
                    ("ses_done", ThreadStatus::Live, Phase::Idle),
                    ("ses_pass", ThreadStatus::Live, Phase::Idle),
                    ("ses_gone", ThreadStatus::Live, Phase::Idle),
                ] {
                    insert_thread(tx, &NewThread::under_root(id, m, status, phase))?;
                }
                tx.sqlite().unwrap().execute_batch(
                    "UPDATE threads SET outcome = 'succeeded' WHERE id IN ('ses_done', 'ses_pass');
                     UPDATE threads SET status = 'closed', exit_kind = 'stopped'
                     WHERE id IN ('ses_pass', 'ses_gone');
                     INSERT INTO reports (worker_id, verdict, summary, evidence, message_id, created_at)
                     VALUES ('ses_pass', 'PASS WITH NOTES', 'ok', '[]', 'msg_1', '2026-01-01T00:00:00.000Z');",
                )?;
                Ok(())
            })
            .unwrap();
        let conn = store.read().unwrap();
        let rows = load_rows(&conn, "").unwrap().rows;
        let status: Vec<(String, String)> = rows
            .iter()
            .map(|r| (r.id.clone(), r.state_text()))
            .collect();
        let want = [
            ("ses_busy", "running"),
            ("ses_done", "no report"),
            ("ses_gone", "interrupted"),
            ("ses_new", "starting"),
            ("ses_pass", "PASS WITH NOTES"),
        ];
        for (id, s) in want {
            assert!(
                status.iter().any(|(i, t)| i == id && t == s),
                "{id}: {s} in {status:?}"
            );
        }
    }
}
