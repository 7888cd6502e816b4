-- The worktrees of the threads in the JSON array ?1, by position in that array (a list's
-- batch): one primary-key lookup of thread_worktrees per id.
SELECT {batch_row}, {worktree_row}
FROM json_each(?1) AS j JOIN thread_worktrees AS w ON w.thread_id = j.value
