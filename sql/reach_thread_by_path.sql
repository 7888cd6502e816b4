-- Reference resolution step 2 past the manager's own threads: the threads at exactly :path in
-- the contract A managers below :manager. A manager's threads all lie below its scope path, so
-- the walk down managers_by_parent follows only managers whose scope :path lies below; each
-- reached manager is one lookup of UNIQUE (manager_id, path). Two rows: the caller reports
-- an ambiguity.
WITH RECURSIVE reach (id) AS (
    SELECT m.id FROM managers m
    WHERE m.parent_manager_id = :manager AND m.contract = 'thread'
      AND :path > m.scope_path || '/' AND :path < m.scope_path || '0'
    UNION
    SELECT m.id FROM reach r
    JOIN managers m ON m.parent_manager_id = r.id AND m.contract = 'thread'
    WHERE :path > m.scope_path || '/' AND :path < m.scope_path || '0'
)
SELECT {thread_row}
FROM reach r CROSS JOIN threads t ON t.manager_id = r.id AND t.path = :path
ORDER BY t.manager_id
LIMIT 2
