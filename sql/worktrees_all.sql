-- Every worktree with its thread's path, state and host (`worktree list`, `worktree clean`,
-- `check`), oldest first: the whole table (one row per isolated thread) joined to threads
-- by primary key.
SELECT {worktree_row}, {worktree_thread_row}
FROM thread_worktrees w JOIN threads t ON t.id = w.thread_id
ORDER BY w.created_at, w.thread_id
