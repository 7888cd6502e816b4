-- `worktree clean` removed a thread's worktree folder and branch (primary key).
UPDATE thread_worktrees SET removed_at = ?2 WHERE thread_id = ?1 AND removed_at IS NULL
