-- A thread's worktree (primary key of thread_worktrees).
SELECT {worktree_row} FROM thread_worktrees w WHERE w.thread_id = ?1
