//! Issue 48: reviewing, merging and removing isolated threads' worktrees (`threadbase diff`,
//! `merge`, `worktree list`, `worktree clean`). The rows come from `store::worktrees`, every
//! git run from `crate::worktree`; each refusal is an error with its `Repair:` decided before
//! anything changes. A host manages only its own threads' worktrees (a team database is
//! shared; a worktree folder is not).

use std::path::Path;

use serde::Serialize;

use crate::domain::{Phase, ThreadStatus};
use crate::error::{Error, ErrorCode, Result};
use crate::store::refs::resolve_anywhere;
use crate::store::threads::ThreadRow;
use crate::store::worktrees::{self, Listed, WorktreeRow};
use crate::store::Store;
use crate::worktree::{self as git, MergeMode, Merged, Stat};

/// An isolated thread found by reference, with its worktree row (never removed, on this
/// host, its folder there).
struct Found {
    row: ThreadRow,
    tree: WorktreeRow,
}

fn find(store: &Store, reference: &str, verb: &str) -> Result<Found> {
    let conn = store.read()?;
    let row = resolve_anywhere(&conn, reference, None, None)?;
    let tree = worktrees::of_thread_checked(&conn, &row.id)?
        .ok_or_else(|| git::not_isolated(&format!("{} ({})", row.path, row.id), verb))?;
    if let Some(at) = &tree.removed_at {
        return Err(Error::invalid(format!(
            "Cannot {verb} {} ({}): its worktree was removed by `threadbase worktree clean` at {at}, with its branch {}. Repair: nothing is left to {verb}; a merged thread's changes are in {}'s history (git -C {} log).",
            row.path, row.id, tree.branch, tree.repo, tree.repo
        )));
    }
    let here = &crate::host::HostIdentity::here().host_id;
    if let Some(l) = worktrees::all(&conn)?
        .into_iter()
        .find(|l| l.worktree.thread_id == row.id)
    {
        if l.host_id.as_deref().is_some_and(|h| h != here) {
            return Err(Error::forbidden(format!(
                "Cannot {verb} {} ({}): its worktree is on host {}, not this one ({here}). Repair: run `threadbase {verb} {}` on that host.",
                row.path,
                row.id,
                l.host_id.unwrap_or_default(),
                row.id
            )));
        }
    }
    if !Path::new(&tree.path).is_dir() {
        return Err(Error::io(format!(
            "Cannot {verb} {} ({}): its worktree folder {} is gone. Repair: `threadbase check` lists it; `threadbase worktree clean {} --closed` forgets it and deletes its branch {} (its commits stay reachable only from the reflog).",
            row.path, row.id, tree.path, row.id, tree.branch
        )));
    }
    Ok(Found { row, tree })
}

/// `threadbase diff REF [--stat]`: what the thread changed since its base commit, committed
/// or not, untracked files included.
pub fn diff(store: &Store, reference: &str, stat_only: bool) -> Result<String> {
    let f = find(store, reference, "diff")?;
    git::diff(Path::new(&f.tree.path), &f.tree.base_commit, stat_only)
}

/// What `merge` answers.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeOutcome {
    pub thread_id: String,
    pub path: String,
    pub branch: String,
    pub into: String,
    pub repo: String,
    pub squash: bool,
    /// The commit made on the thread's branch from its uncommitted work.
    pub committed: Option<String>,
    /// The main tree's new HEAD; `None` when nothing was left to bring in.
    pub head: Option<String>,
    pub files: Vec<String>,
}

/// `threadbase merge REF [--squash]`: brings the thread's changes into the main work tree's
/// current branch. Refused, with nothing changed, for a thread that is not isolated, live and
/// busy, whose changes touch files the main tree has uncommitted changes to, or that
/// conflict (`crate::worktree::merge`).
pub fn merge(store: &Store, reference: &str, squash: bool) -> Result<MergeOutcome> {
    let f = find(store, reference, "merge")?;
    if f.row.is_live()
        && matches!(
            f.row.phase(),
            Phase::Busy | Phase::Starting | Phase::Stopping
        )
    {
        return Err(Error::new(
            ErrorCode::Conflict,
            format!(
                "Cannot merge {} ({}): the thread is live and {} (it may be writing its files now). Nothing was changed. Repair: wait for it to go idle (thread action \"wait\"), or stop it, then merge again.",
                f.row.path,
                f.row.id,
                f.row.phase().as_str()
            ),
        ));
    }
    let thread = format!("{} ({})", f.row.path, f.row.id);
    let repo = Path::new(&f.tree.repo);
    let Merged {
        committed,
        head,
        files,
    } = git::merge(&git::MergeRequest {
        repo,
        worktree: Path::new(&f.tree.path),
        branch: &f.tree.branch,
        base: &f.tree.base_commit,
        thread: &thread,
        mode: if squash {
            MergeMode::Squash
        } else {
            MergeMode::Merge
        },
    })?;
    Ok(MergeOutcome {
        thread_id: f.row.id.to_string(),
        path: f.row.path,
        branch: f.tree.branch,
        into: git::branch_name(repo),
        repo: f.tree.repo,
        squash,
        committed,
        head,
        files,
    })
}

/// The text of a merge's outcome.
pub fn merge_text(m: &MergeOutcome) -> String {
    match &m.head {
        None => format!(
            "Nothing to merge: {} ({}) has no change that {} lacks.",
            m.path, m.branch, m.into
        ),
        Some(head) => {
            let mut s = format!(
                "Merged {} ({}) into {} of {}{}: {} file{} ({}), now at {}.",
                m.path,
                m.branch,
                m.into,
                m.repo,
                if m.squash { " as one commit" } else { "" },
                m.files.len(),
                if m.files.len() == 1 { "" } else { "s" },
                m.files.join(", "),
                &head[..head.len().min(12)]
            );
            if let Some(c) = &m.committed {
                s.push_str(&format!(
                    "\nIts uncommitted work was committed on {} first ({}).",
                    m.branch,
                    &c[..c.len().min(12)]
                ));
            }
            s
        }
    }
}

/// One worktree as `worktree list` shows it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedTree {
    pub thread_id: String,
    pub thread_path: String,
    pub state: String,
    #[serde(flatten)]
    pub worktree: WorktreeRow,
    /// Whether the folder exists (on this host).
    pub present: bool,
    /// What it changed since its base (present folders of this host).
    pub files_changed: Option<u64>,
    pub insertions: Option<u64>,
    pub deletions: Option<u64>,
    pub host_id: Option<String>,
}

fn state_of(l: &Listed) -> String {
    match l.status {
        ThreadStatus::Live => format!("live/{}", l.phase.as_str()),
        ThreadStatus::Closed => "closed".to_string(),
    }
}

/// `threadbase worktree list`: every worktree row, oldest first, with its thread's state and
/// (for this host's present folders) what it changed.
pub fn list(conn: &crate::store::Conn) -> Result<Vec<ListedTree>> {
    let here = &crate::host::HostIdentity::here().host_id;
    let rows = worktrees::all(conn)?;
    Ok(rows
        .into_iter()
        .map(|l| {
            let mine = l.host_id.as_deref().is_none_or(|h| h == here);
            let present = mine && Path::new(&l.worktree.path).is_dir();
            let stat: Option<Stat> = (present && l.worktree.removed_at.is_none())
                .then(|| git::stat(Path::new(&l.worktree.path), &l.worktree.base_commit).ok())
                .flatten();
            ListedTree {
                thread_id: l.worktree.thread_id.to_string(),
                thread_path: l.thread_path.clone(),
                state: state_of(&l),
                present,
                files_changed: stat.map(|s| s.files),
                insertions: stat.map(|s| s.insertions),
                deletions: stat.map(|s| s.deletions),
                host_id: l.host_id.clone(),
                worktree: l.worktree,
            }
        })
        .collect())
}

/// The text of `worktree list`.
pub fn list_text(items: &[ListedTree]) -> String {
    if items.is_empty() {
        return "No worktrees: no thread ran isolated (THREADBASE_ISOLATION=worktree).".into();
    }
    let mut s = String::new();
    for t in items {
        let what = if let Some(at) = &t.worktree.removed_at {
            format!("removed {at}")
        } else if !t.present {
            "folder missing".to_string()
        } else {
            match t.files_changed {
                Some(files) => crate::contract::format::stat_text(&Stat {
                    files,
                    insertions: t.insertions.unwrap_or(0),
                    deletions: t.deletions.unwrap_or(0),
                }),
                None => "changes unknown".to_string(),
            }
        };
        s.push_str(&format!(
            "{} [{}] {} {} (branch {}): {what}\n",
            t.thread_path, t.state, t.thread_id, t.worktree.path, t.worktree.branch
        ));
    }
    s.pop();
    s
}

/// Which worktrees `worktree clean` removes.
#[derive(Debug, Clone, Default)]
pub struct CleanArgs<'a> {
    /// One thread's worktree (a reference), instead of every one that qualifies.
    pub reference: Option<&'a str>,
    /// Only worktrees whose work is in the main tree's current branch.
    pub merged: bool,
    /// Worktrees of closed threads, merged or not.
    pub closed: bool,
    pub dry_run: bool,
}

/// One worktree `clean` looked at.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Cleaned {
    pub thread_id: String,
    pub thread_path: String,
    pub path: String,
    pub branch: String,
    /// `removed`, `would remove` (dry run), or why it was kept.
    pub outcome: String,
}

/// `threadbase worktree clean [REF] [--merged] [--closed] [--dry-run]`: removes worktree
/// folders and branches of closed threads on this host (never a live one's), `--merged` only
/// those whose work is merged, and marks their rows removed.
pub fn clean(store: &Store, args: &CleanArgs<'_>) -> Result<Vec<Cleaned>> {
    if args.reference.is_none() && !args.merged && !args.closed {
        return Err(Error::invalid(
            "worktree clean needs to know what to remove. Repair: pass --merged (closed threads whose work is merged into the main tree's branch), --closed (every closed thread's worktree, merged or not: unmerged work is lost), or a thread reference; add --dry-run to see what it would remove.",
        ));
    }
    let here = crate::host::HostIdentity::here().host_id.clone();
    let conn = store.read()?;
    let mut rows = worktrees::all(&conn)?;
    if let Some(r) = args.reference {
        let row = resolve_anywhere(&conn, r, None, None)?;
        rows.retain(|l| l.worktree.thread_id == row.id);
        let Some(l) = rows.first() else {
            return Err(git::not_isolated(
                &format!("{} ({})", row.path, row.id),
                "clean",
            ));
        };
        if l.status == ThreadStatus::Live {
            return Err(Error::new(
                ErrorCode::Conflict,
                format!(
                    "Cannot clean {} ({}): the thread is live, and its worktree is where it works. Nothing was removed. Repair: stop it first (threadbase stop {}), then clean.",
                    row.path, row.id, row.path
                ),
            ));
        }
        if l.worktree.removed_at.is_some() {
            return Err(Error::invalid(format!(
                "Cannot clean {} ({}): its worktree was removed already at {}. Repair: nothing to do; `threadbase worktree list` shows what is left.",
                row.path,
                row.id,
                l.worktree.removed_at.clone().unwrap_or_default()
            )));
        }
    }
    drop(conn);
    let mut out = Vec::new();
    for l in rows {
        if l.worktree.removed_at.is_some() || l.host_id.as_deref().is_some_and(|h| h != here) {
            continue;
        }
        let w = &l.worktree;
        let keep = |why: &str| Cleaned {
            thread_id: w.thread_id.to_string(),
            thread_path: l.thread_path.clone(),
            path: w.path.clone(),
            branch: w.branch.clone(),
            outcome: why.to_string(),
        };
        if l.status == ThreadStatus::Live {
            out.push(keep("kept: the thread is live"));
            continue;
        }
        let repo = Path::new(&w.repo);
        if args.merged && !git::is_merged(repo, Path::new(&w.path), &w.branch)? {
            out.push(keep("kept: not merged"));
            continue;
        }
        if args.dry_run {
            out.push(keep("would remove"));
            continue;
        }
        git::remove(repo, Path::new(&w.path), &w.branch)?;
        store.write(|tx| {
            worktrees::set_removed(tx, &w.thread_id, &crate::time::now_iso()).map(drop)
        })?;
        out.push(keep("removed"));
    }
    Ok(out)
}

/// The text of `worktree clean`.
pub fn clean_text(items: &[Cleaned]) -> String {
    if items.is_empty() {
        return "No worktree to clean on this host.".into();
    }
    items
        .iter()
        .map(|c| {
            format!(
                "{}: {} {} (branch {})",
                c.outcome, c.thread_path, c.path, c.branch
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
