-- sql/list_descendants_reach.sql on PostgreSQL: a comparison is a boolean here, not the integer
-- `archived` holds; a plain JOIN for SQLite's CROSS JOIN … ON (which only fixes SQLite's join
-- order).
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
FROM reach r JOIN threads t ON t.manager_id = r.id
WHERE t.sort_key > :lo AND t.sort_key < :hi
  AND (:state = 'all' OR t.status = :state)
  AND (:visibility = 'all' OR t.archived = CASE WHEN :visibility = 'archived' THEN 1 ELSE 0 END)
ORDER BY t.sort_key
