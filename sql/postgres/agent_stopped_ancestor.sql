-- sql/agent_stopped_ancestor.sql on PostgreSQL: the recursive term's first row (the parameter)
-- gets the path column's type and collation.
WITH RECURSIVE up (p) AS (
    SELECT CAST(:path AS text) COLLATE "C"
    UNION ALL
    SELECT t.parent_path FROM up JOIN threads t ON t.manager_id = :manager AND t.path = up.p
    WHERE t.parent_path IS NOT NULL
)
SELECT t.path FROM up JOIN threads t ON t.manager_id = :manager AND t.path = up.p
WHERE t.agent_state = 'stopped' OR t.agent_stop_requested = 1
ORDER BY length(t.path)
LIMIT 1
