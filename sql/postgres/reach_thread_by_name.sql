-- sql/reach_thread_by_name.sql on PostgreSQL: a plain JOIN for SQLite's CROSS JOIN … ON (which
-- only fixes SQLite's join order).
WITH RECURSIVE reach (id) AS (
    SELECT m.id FROM managers m WHERE m.parent_manager_id = :manager AND m.contract = 'thread'
    UNION
    SELECT m.id FROM reach r
    JOIN managers m ON m.parent_manager_id = r.id AND m.contract = 'thread'
)
SELECT {thread_row}
FROM reach r JOIN threads t ON t.manager_id = r.id AND t.task_name = :name
ORDER BY t.sort_key
LIMIT :limit
