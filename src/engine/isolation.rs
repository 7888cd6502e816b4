//! Issue 48: a new thread in a git worktree of its own. What start, fork, `agent_spawn` and
//! `threads_spawn` share: before the reservation, [`prepare`] asks git where the parent's
//! directory is (`crate::worktree::probe`); inside the reserving transaction, [`Prepared::plan`]
//! names the worktree from the chosen task name and the thread's id, and [`record`] writes its
//! `thread_worktrees` row right after the thread's; after the commit, [`create`] makes the
//! folder and branch before the child is launched in it. Nothing here deletes a worktree:
//! only `threadbase worktree clean` does.

use std::path::{Path, PathBuf};

use super::Engine;
use crate::domain::ThreadId;
use crate::error::Result;
use crate::store::facts::{ThreadFacts, WorktreeFacts};
use crate::store::worktrees::{self, NewWorktree};
use crate::store::Tx;
use crate::worktree::{self as git, Plan, Probe, Repo};

/// What a new thread's isolation comes to, decided before its reservation.
#[derive(Debug, Clone)]
pub(super) enum Prepared {
    /// Isolation is off: the thread runs in its parent's directory.
    Off,
    /// Isolation is on but the directory is not in a git work tree: the thread runs as
    /// without it, and its start result says why (the note).
    NotRepo(String),
    /// A worktree is made from `repo.head`, the child's cwd at `repo.rel` inside it.
    Repo(Repo),
}

impl Prepared {
    /// The worktree of the thread `id` named `task` (inside its reservation).
    pub(super) fn plan(&self, id: &ThreadId, task: &str) -> Option<Plan> {
        match self {
            Prepared::Repo(r) => Some(git::plan(&r.root, &r.rel, &r.head, task, short(id))),
            _ => None,
        }
    }

    /// What the start result says when isolation was asked for and not given.
    pub(super) fn note(&self) -> Option<String> {
        match self {
            Prepared::NotRepo(why) => Some(format!(
                "not isolated: {why}, so the thread runs in that directory (THREADBASE_ISOLATION=worktree isolates threads only inside a git work tree). Repair: start it with a cwd inside a repository (git init and a first commit there), or unset THREADBASE_ISOLATION."
            )),
            _ => None,
        }
    }
}

/// The piece of a thread id a worktree's name carries (the same six characters a generated
/// task name takes).
pub(super) fn short(id: &ThreadId) -> &str {
    let s = id.as_str();
    s.get(7..13).unwrap_or(s)
}

/// Where a new thread with isolation `on` would run from `cwd`: off, not in a repository (a
/// note), or a repository and the commit to start from. A repository without a commit is
/// an error with its repair, before anything is reserved.
pub(super) fn prepare(on: bool, cwd: &Path) -> Result<Prepared> {
    if !on {
        return Ok(Prepared::Off);
    }
    Ok(match git::probe(cwd)? {
        Probe::NotRepo(why) => Prepared::NotRepo(why),
        Probe::Repo(r) => Prepared::Repo(r),
    })
}

/// A fork's isolation: an isolated source's fork gets a worktree of its own, from a commit
/// of the source worktree's current state (uncommitted and untracked files included; the
/// source is not touched), its cwd at the same place; any other source's fork is prepared
/// as a start from `cwd` is.
pub(super) fn prepare_fork(e: &Engine, source: Option<&ThreadId>, cwd: &Path) -> Result<Prepared> {
    let row = match source {
        Some(id) => worktrees::of_thread(&e.store.read()?, id)?.filter(|w| w.removed_at.is_none()),
        None => None,
    };
    let Some(row) = row else {
        return prepare(e.cfg.settings.isolation, cwd);
    };
    let top = PathBuf::from(&row.path);
    let head = git::snapshot(&top, &format!("threadbase: state of {} forked", row.branch))?;
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let rel = canon(cwd)
        .strip_prefix(canon(&top))
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Ok(Prepared::Repo(Repo {
        root: PathBuf::from(&row.repo),
        top,
        rel,
        head,
    }))
}

/// Writes `plan`'s row for thread `id` (in the reserving transaction, after the thread's).
pub(super) fn record(tx: &Tx<'_>, id: &ThreadId, plan: &Plan) -> Result<()> {
    worktrees::insert(
        tx,
        &NewWorktree {
            thread_id: id,
            repo: &plan.repo.display().to_string(),
            path: &plan.path.display().to_string(),
            branch: &plan.branch,
            base_commit: &plan.base,
            at: &crate::time::now_iso(),
        },
    )
}

/// Makes `plan`'s worktree (after the reservation commits). When git fails, the row is marked
/// removed (no folder exists) and the error goes back, so the caller closes the thread as a
/// launch that failed.
pub(super) fn create(e: &Engine, id: &ThreadId, plan: &Plan) -> Result<()> {
    git::create(plan).inspect_err(|_| {
        let _ = e
            .store
            .write(|tx| worktrees::set_removed(tx, id, &crate::time::now_iso()).map(drop));
    })
}

/// `facts` with what its worktree changed since its base (git asked now), when it is isolated
/// and the folder is there.
pub(super) fn with_stat(mut facts: ThreadFacts) -> ThreadFacts {
    if let Some(WorktreeFacts { row, stat }) = facts.worktree.as_mut() {
        if row.removed_at.is_none() && Path::new(&row.path).is_dir() {
            *stat = git::stat(Path::new(&row.path), &row.base_commit).ok();
        }
    }
    facts
}
