-- The first reason a saved registry cannot be restored, if any: a /root entry, a thread without
-- a lifecycle state, or a parent link that does not match an existing thread.
SELECT CASE
         WHEN t.path = '/root' THEN 'Invalid saved entry /root'
         WHEN t.agent_state IS NULL THEN 'Unknown saved state for ' || t.path
         ELSE 'Missing saved parent ' || t.parent_path || ' of ' || t.path
       END
FROM threads t
WHERE t.manager_id = ?1
  AND (t.path = '/root' OR t.agent_state IS NULL
       OR (t.parent_path IS NOT NULL AND t.parent_path <> '/root'
           AND NOT EXISTS (SELECT 1 FROM threads p
                           WHERE p.manager_id = t.manager_id AND p.path = t.parent_path)))
LIMIT 1
