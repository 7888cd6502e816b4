//! `thread_worktrees` (V17, PostgreSQL V6; issue 48): the git worktree of each isolated
//! thread, one row per thread, written in the transaction that reserves the thread and
//! marked removed by `threadbase worktree clean`. The git side is `crate::worktree`.

use serde::Serialize;

use crate::domain::{Phase, ThreadId, ThreadStatus};
use crate::error::Result;
use crate::store::db::{params, q, Row};
use crate::store::rows::columns;
use crate::store::{batch_col, Conn, ThreadIds};

columns! {
    /// A worktree row (`{worktree_row}`, reading `thread_worktrees w`).
    pub mod col as "{worktree_row}" {
        THREAD_ID = "w.thread_id",
        REPO = "w.repo",
        PATH = "w.path",
        BRANCH = "w.branch",
        BASE_COMMIT = "w.base_commit",
        CREATED_AT = "w.created_at",
        REMOVED_AT = "w.removed_at",
    }
}

/// A thread's worktree as its row says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorktreeRow {
    #[serde(skip)]
    pub thread_id: ThreadId,
    pub repo: String,
    pub path: String,
    pub branch: String,
    pub base_commit: String,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub removed_at: Option<String>,
}

impl WorktreeRow {
    pub(in crate::store) fn from_row(r: &Row<'_>, at: usize) -> Result<WorktreeRow> {
        Ok(WorktreeRow {
            thread_id: r.get(at + col::THREAD_ID)?,
            repo: r.get(at + col::REPO)?,
            path: r.get(at + col::PATH)?,
            branch: r.get(at + col::BRANCH)?,
            base_commit: r.get(at + col::BASE_COMMIT)?,
            created_at: r.get(at + col::CREATED_AT)?,
            removed_at: r.get(at + col::REMOVED_AT)?,
        })
    }

    /// The folder, relative to the repository when it is inside it (as the texts show it).
    pub fn shown_path(&self) -> String {
        std::path::Path::new(&self.path)
            .strip_prefix(&self.repo)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| self.path.clone())
    }
}

/// A new worktree row.
pub struct NewWorktree<'a> {
    pub thread_id: &'a ThreadId,
    pub repo: &'a str,
    pub path: &'a str,
    pub branch: &'a str,
    pub base_commit: &'a str,
    pub at: &'a str,
}

/// Writes `w`'s row (in the reserving transaction).
pub fn insert(conn: &Conn, w: &NewWorktree<'_>) -> Result<()> {
    conn.execute(
        q!("worktree_insert"),
        params![w.thread_id, w.repo, w.path, w.branch, w.base_commit, w.at],
    )?;
    Ok(())
}

/// The worktree of thread `id`, if it is isolated.
pub fn of_thread(conn: &Conn, id: &ThreadId) -> Result<Option<WorktreeRow>> {
    conn.opt(q!("worktree_of_thread", col), params![id], |r| {
        WorktreeRow::from_row(r, 0)
    })
}

/// [`of_thread`] on a database of any version: nothing before the table (V17).
pub fn of_thread_checked(conn: &Conn, id: &ThreadId) -> Result<Option<WorktreeRow>> {
    if !has_table(conn)? {
        return Ok(None);
    }
    of_thread(conn, id)
}

/// The worktrees of `ids`, in their order (a list's batch: one query).
pub fn of_threads(conn: &Conn, ids: &ThreadIds) -> Result<Vec<Option<WorktreeRow>>> {
    let mut slots = vec![None; ids.len()];
    conn.by_position(
        q!("worktrees_of_threads", batch_col, col),
        ids,
        &mut slots,
        |r| WorktreeRow::from_row(r, batch_col::COUNT).map(Some),
    )?;
    Ok(slots)
}

/// Whether the database has the table (schema version 17 or later).
pub fn has_table(conn: &Conn) -> Result<bool> {
    Ok(conn.one(q!("worktrees_schema"), params![], |r| r.get::<i64>(0))? > 0)
}

columns! {
    /// The thread a listed worktree belongs to (`{worktree_thread_row}` after
    /// `{worktree_row}` in `sql/worktrees_all.sql`, reading `threads t`).
    pub mod thread_col as "{worktree_thread_row}" {
        PATH = "t.path",
        STATUS = "t.status",
        PHASE = "t.phase",
        HOST_ID = "t.host_id",
    }
}

/// A worktree with its thread, as `worktree list`, `clean` and `check` read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub worktree: WorktreeRow,
    pub thread_path: String,
    pub status: ThreadStatus,
    pub phase: Phase,
    /// The host that recorded the thread (a serve manages only its own host's worktrees).
    pub host_id: Option<String>,
}

/// Every worktree row with its thread, oldest first (nothing before V17).
pub fn all(conn: &Conn) -> Result<Vec<Listed>> {
    if !has_table(conn)? {
        return Ok(Vec::new());
    }
    conn.all(q!("worktrees_all", col, thread_col), params![], |r| {
        let at = col::COUNT;
        Ok(Listed {
            worktree: WorktreeRow::from_row(r, 0)?,
            thread_path: r.get(at + thread_col::PATH)?,
            status: r.get(at + thread_col::STATUS)?,
            phase: r.get(at + thread_col::PHASE)?,
            host_id: r.get(at + thread_col::HOST_ID)?,
        })
    })
}

/// Marks thread `id`'s worktree removed at `at`; whether a row changed.
pub fn set_removed(conn: &Conn, id: &ThreadId, at: &str) -> Result<bool> {
    Ok(conn.execute(q!("worktree_removed"), params![id, at])? > 0)
}
