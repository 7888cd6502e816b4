//! Top's reads: every thread with its manager, its place in its tree and what it spent, and
//! one thread's detail. Kept apart from drawing so the reads are tested alone.

use std::collections::HashMap;

use ratatui::text::Line;
use rusqlite::Connection;
use serde_json::Value;

use crate::contract::projection::{self, Detail};
use crate::engine::budget::usd;
use crate::error::Result;
use crate::runtime::process::ProcessIdentity;
use crate::store::{events, threads::thread_by_id_any};

/// One thread as the tree shows it.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) id: String,
    pub(super) session: String,
    pub(super) contract: String,
    pub(super) path: String,
    pub(super) task_name: String,
    pub(super) name: String,
    status: String,
    phase: String,
    agent_state: Option<String>,
    exit_kind: Option<String>,
    pub(super) archived: bool,
    pub(super) hidden: bool,
    pub(super) created_at: String,
    pub(super) last_event_at: String,
    pub(super) owner: Option<ProcessIdentity>,
    /// Every token the thread's messages used, and their cost.
    pub(super) tokens: i64,
    pub(super) cost_usd: f64,
    /// The root session of the whole tree it belongs to, across managers (V4's places).
    pub(super) root: Option<String>,
    /// The thread it hangs under in that tree (possibly in another manager).
    pub(super) forest_parent: Option<String>,
    /// A contract C worker's run outcome and report verdict (its list status).
    outcome: Option<String>,
    verdict: Option<String>,
}

impl Row {
    pub(super) fn live(&self) -> bool {
        self.status == "live"
    }

    pub(super) fn state_text(&self) -> String {
        if self.contract == "agent" {
            if let Some(s) = &self.agent_state {
                return s.clone();
            }
        }
        if self.contract == "worker" {
            // The status the original's terminal UI lists (not part of threads_list).
            return crate::contract::worker::list_status(
                &self.status,
                &self.phase,
                self.verdict.as_deref(),
                self.outcome.as_deref(),
            )
            .to_string();
        }
        let mut s = format!("{}/{}", self.status, self.phase);
        if let Some(k) = &self.exit_kind {
            s.push(' ');
            s.push_str(k);
        }
        s
    }
}

pub(super) fn load_rows(conn: &Connection) -> Result<Vec<Row>> {
    let mut stmt = conn.prepare_cached(include_str!("../../../sql/top_threads.sql"))?;
    let rows = stmt.query_map([], |r| {
        let owner_pid: Option<i64> = r.get(15)?;
        let owner_started: Option<i64> = r.get(16)?;
        Ok(Row {
            id: r.get(0)?,
            session: r.get(1)?,
            contract: r.get(2)?,
            path: r.get(3)?,
            task_name: r.get(5)?,
            name: r.get(6)?,
            status: r.get(7)?,
            phase: r.get(8)?,
            agent_state: r.get(9)?,
            exit_kind: r.get(10)?,
            archived: r.get(11)?,
            hidden: r.get::<_, Option<bool>>(12)?.unwrap_or(false),
            created_at: r.get(13)?,
            last_event_at: r.get(14)?,
            owner: owner_pid
                .zip(owner_started)
                .map(|(pid, started_at)| ProcessIdentity { pid, started_at }),
            tokens: 0,
            cost_usd: 0.0,
            root: None,
            forest_parent: None,
            outcome: r.get(17)?,
            verdict: r.get(18)?,
        })
    })?;
    let mut rows = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    if crate::store::usage::has_tables(conn)? {
        let mut stmt = conn.prepare_cached(include_str!("../../../sql/top_places.sql"))?;
        let places: HashMap<String, (String, Option<String>)> = stmt
            .query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))?
            .collect::<rusqlite::Result<_>>()?;
        for r in &mut rows {
            if let Some((root, parent)) = places.get(&r.id) {
                r.root = Some(root.clone());
                r.forest_parent = parent.clone();
            }
        }
    }
    let spent = crate::store::usage::all_if_any(conn)?;
    for r in &mut rows {
        if let Some(u) = spent.get(&r.id) {
            r.tokens = u.total_tokens();
            r.cost_usd = u.cost_usd;
        }
    }
    Ok(rows)
}

/// The `poll` projection of one thread at `tail` detail.
pub(super) fn thread_snapshot(conn: &Connection, id: &str) -> Result<Option<Value>> {
    let Some(row) = thread_by_id_any(conn, id)? else {
        return Ok(None);
    };
    let out = crate::engine::output_facts(conn, id)?;
    let evs = events::rows_of_thread(conn, id)?;
    Ok(Some(projection::snapshot(&row, &out, &evs, Detail::Tail)))
}

/// What the thread spent, and its subtree across every manager of its tree.
pub(super) fn usage_lines(conn: &Connection, id: &str) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if !crate::store::usage::has_tables(conn).unwrap_or(false) {
        return out;
    }
    if let Ok(Some(u)) = crate::store::usage::of_thread(conn, id) {
        out.push(Line::from(format!(
            "usage: {}",
            crate::cli::usage::summary(&u)
        )));
    }
    if let Ok(Some(s)) = crate::store::usage::of_subtree(conn, id) {
        out.push(Line::from(format!(
            "subtree: {} thread{} · {} tokens · {}",
            s.threads,
            if s.threads == 1 { "" } else { "s" },
            crate::engine::budget::thousands(s.usage.total_tokens()),
            usd(s.usage.cost_usd)
        )));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec, NewThread};

    /// A contract C worker's row shows the list status the original's terminal UI shows
    /// (threads_list itself returns only `{workers}`); other contracts keep theirs.
    #[test]
    fn worker_rows_show_their_list_status() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::store::Store::open(dir.path().join("t.sqlite")).unwrap();
        store
            .write(|tx| {
                let m = upsert_manager(
                    tx,
                    &ManagerSpec {
                        session_id: "ses_coord",
                        contract: Contract::Worker,
                        scope_path: "/root",
                        depth: 0,
                        self_thread_id: None,
                        session_file: None,
                        cwd: None,
                        owner_pid: None,
                        owner_started_at: None,
                    },
                )?;
                for (id, status, phase) in [
                    ("ses_busy", "live", "busy"),
                    ("ses_new", "live", "starting"),
                    ("ses_done", "live", "idle"),
                    ("ses_pass", "live", "idle"),
                    ("ses_gone", "live", "idle"),
                ] {
                    insert_thread(
                        tx,
                        &NewThread {
                            id: id.into(),
                            manager_id: m,
                            path: format!("/root/{id}"),
                            parent_path: Some("/root".into()),
                            task_name: id.into(),
                            name: id.into(),
                            depth: 1,
                            cwd: "/w".into(),
                            status,
                            phase,
                            ..Default::default()
                        },
                    )?;
                }
                tx.execute_batch(
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
        let rows = load_rows(&conn).unwrap();
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
