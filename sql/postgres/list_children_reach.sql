-- sql/list_children_reach.sql on PostgreSQL: a comparison is a boolean here, not the integer
-- `archived` holds; a plain JOIN for SQLite's CROSS JOIN … ON (which only fixes SQLite's join
-- order).
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
FROM reach r JOIN threads t ON t.manager_id = r.id AND t.parent_path = :parent
WHERE (:state = 'all' OR t.status = :state)
  AND (:visibility = 'all' OR t.archived = CASE WHEN :visibility = 'archived' THEN 1 ELSE 0 END)
ORDER BY t.sort_key
