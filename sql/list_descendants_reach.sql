-- `list` with `ancestor`, the part below the manager's own threads: every thread below
-- :path held by contract A managers below :manager. The walk down managers_by_parent follows
-- only managers whose scope is :path, lies below it or above it; each reached manager is one
-- range of threads_by_sort_key (:lo = key || '/', :hi = key || '0'). The rows are sorted into
-- list order; the caller merges them with the own part (sql/list_descendants*.sql).
-- Each row is the thread's id, path and status (store::list::listed_col). The rest of a thread
-- row is read only for the threads without an answer kept in the serve's memory
-- (engine/cache.rs; sql/threads_by_ids.sql): stepping the whole row cost 2k instructions a
-- listed thread.
WITH RECURSIVE reach (id) AS (
    SELECT m.id FROM managers m
    WHERE m.parent_manager_id = :manager AND m.contract = 'thread'
      AND (m.scope_path = :path
           OR (m.scope_path > :path || '/' AND m.scope_path < :path || '0')
           OR (:path > m.scope_path || '/' AND :path < m.scope_path || '0'))
    UNION
    SELECT m.id FROM reach r
    JOIN managers m ON m.parent_manager_id = r.id AND m.contract = 'thread'
    WHERE m.scope_path = :path
       OR (m.scope_path > :path || '/' AND m.scope_path < :path || '0')
       OR (:path > m.scope_path || '/' AND :path < m.scope_path || '0')
)
SELECT {listed_row}
FROM reach r CROSS JOIN threads t ON t.manager_id = r.id
WHERE t.sort_key > :lo AND t.sort_key < :hi
  AND (:state = 'all' OR t.status = :state)
  AND (:visibility = 'all' OR t.archived = (:visibility = 'archived'))
ORDER BY t.sort_key
