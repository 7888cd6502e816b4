-- sql/thread_ancestors.sql on PostgreSQL: a plain JOIN for SQLite's CROSS JOIN … ON (which only
-- fixes SQLite's join order).
WITH RECURSIVE up (id, n) AS (
    SELECT parent_id, 1 FROM threads WHERE id = ?1
    UNION ALL
    SELECT t.parent_id, up.n + 1 FROM up JOIN threads t ON t.id = up.id
    WHERE up.n < 64
)
SELECT {thread_row}
FROM up JOIN threads t ON t.id = up.id
ORDER BY up.n DESC
