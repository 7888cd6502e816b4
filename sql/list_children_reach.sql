-- `list` with `parent`, the part below the manager's own threads: the direct children of
-- :parent held by contract A managers below :manager (a child's own serve holds its children).
-- The walk down managers_by_parent follows only managers whose scope is :parent or lies above
-- it (a manager's threads are children of its scope); each reached manager is one
-- threads_by_parent search. The few rows are sorted into list order; the caller merges them
-- with the own part (sql/list_children*.sql), which is already in order.
-- Each row is the thread's id, path and status (store::list::listed_col). The rest of a thread
-- row is read only for the threads without an answer kept in the serve's memory
-- (engine/cache.rs; sql/threads_by_ids.sql): stepping the whole row cost 2k instructions a
-- listed thread.
WITH RECURSIVE reach (id) AS (
    SELECT m.id FROM managers m
    WHERE m.parent_manager_id = :manager AND m.contract = 'thread'
      AND (m.scope_path = :parent
           OR (:parent > m.scope_path || '/' AND :parent < m.scope_path || '0'))
    UNION
    SELECT m.id FROM reach r
    JOIN managers m ON m.parent_manager_id = r.id AND m.contract = 'thread'
    WHERE m.scope_path = :parent
       OR (:parent > m.scope_path || '/' AND :parent < m.scope_path || '0')
)
SELECT {listed_row}
FROM reach r CROSS JOIN threads t ON t.manager_id = r.id AND t.parent_path = :parent
WHERE (:state = 'all' OR t.status = :state)
  AND (:visibility = 'all' OR t.archived = (:visibility = 'archived'))
ORDER BY t.sort_key
