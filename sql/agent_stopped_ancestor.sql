-- The highest stopped (or stopping) thread among :path and its ancestors, walking parent_path
-- through the (manager_id, path) index; at most 32 steps.
WITH RECURSIVE up (p) AS (
    SELECT :path
    UNION ALL
    SELECT t.parent_path FROM up JOIN threads t ON t.manager_id = :manager AND t.path = up.p
    WHERE t.parent_path IS NOT NULL
)
SELECT t.path FROM up JOIN threads t ON t.manager_id = :manager AND t.path = up.p
WHERE t.agent_state = 'stopped' OR t.agent_stop_requested = 1
ORDER BY length(t.path)
LIMIT 1
