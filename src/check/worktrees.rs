//! `check`'s look at the isolated threads' worktrees (issue 48): a `thread_worktrees` row of
//! this host whose folder is gone, and a folder under `<repo>/.threadbase/worktrees/` that no
//! row owns. Both read the file system, not the database's pages, so they are warnings: the
//! database is consistent, the disk is not what it says. Rows of other hosts are theirs to
//! check (a folder is a host's own).

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use super::{Checker, Problem, Severity};
use crate::domain::ThreadStatus;

impl Checker<'_> {
    pub(super) fn worktrees(&mut self) {
        let rows = match crate::store::worktrees::all(self.conn) {
            Ok(rows) => rows,
            Err(e) => return self.failed("worktree_folder_gone", e),
        };
        let here = &crate::host::HostIdentity::here().host_id;
        let mut repos = BTreeSet::new();
        let mut owned = HashSet::new();
        for l in rows
            .iter()
            .filter(|l| l.host_id.as_deref().is_none_or(|h| h == here))
        {
            let w = &l.worktree;
            repos.insert(PathBuf::from(&w.repo));
            owned.insert(PathBuf::from(&w.path));
            if w.removed_at.is_some() || Path::new(&w.path).is_dir() {
                continue;
            }
            let repair = match l.status {
                ThreadStatus::Live => format!(
                    "Stop the thread (threadbase stop {}): it works in a folder that is gone; then `threadbase worktree clean {}` forgets the worktree and deletes its branch {}.",
                    l.thread_path, w.thread_id, w.branch
                ),
                ThreadStatus::Closed => format!(
                    "`threadbase worktree clean {}` marks the row removed and deletes its branch {} (check `git -C {} log {}` first for work you want to keep).",
                    w.thread_id, w.branch, w.repo, w.branch
                ),
            };
            self.push(Problem {
                check: "worktree_folder_gone",
                severity: Severity::Warning,
                message: format!(
                    "The worktree of thread {} ({}) at {} is gone, but its row says it is there.",
                    w.thread_id, l.thread_path, w.path
                ),
                repair,
            });
        }
        for repo in repos {
            for folder in crate::worktree::folders(&repo) {
                if owned.contains(&folder) {
                    continue;
                }
                self.push(Problem {
                    check: "worktree_orphan_folder",
                    severity: Severity::Warning,
                    message: format!(
                        "{} is under {}/{} but no thread's worktree row owns it.",
                        folder.display(),
                        repo.display(),
                        crate::worktree::WORKTREES_DIR
                    ),
                    repair: format!(
                        "Look at it, then remove it: git -C {} worktree remove --force {} (or delete the folder and run git -C {} worktree prune).",
                        repo.display(),
                        folder.display(),
                        repo.display()
                    ),
                });
            }
        }
    }
}
