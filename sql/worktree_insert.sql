-- An isolated thread's worktree, written in the transaction that reserves the thread.
INSERT INTO thread_worktrees (thread_id, repo, path, branch, base_commit, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
