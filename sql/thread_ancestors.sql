-- A thread's ancestors by parent link (threads.parent_id, across managers: a child's own
-- serve records its self thread as the parent of its children), the top first; one
-- primary-key lookup per level, bounded.
WITH RECURSIVE up (id, n) AS (
    SELECT parent_id, 1 FROM threads WHERE id = ?1
    UNION ALL
    SELECT t.parent_id, up.n + 1 FROM up JOIN threads t ON t.id = up.id
    WHERE up.n < 64
)
SELECT {thread_row}
FROM up CROSS JOIN threads t ON t.id = up.id
ORDER BY up.n DESC
