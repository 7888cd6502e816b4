-- sql/agent_reap_candidates.sql on PostgreSQL: `IS NOT 'completed'` (null-safe) is
-- IS DISTINCT FROM here.
SELECT {agent_reaped_row} FROM threads t
WHERE t.manager_id = :registry AND t.agent_state = 'completed' AND t.agent_reaped_at IS NULL
  AND NOT EXISTS (
      SELECT 1 FROM threads d
      WHERE d.manager_id = t.manager_id
        AND d.sort_key > t.sort_key || '/' AND d.sort_key < t.sort_key || '0'
        AND d.agent_reaped_at IS NULL AND d.agent_state IS DISTINCT FROM 'completed')
ORDER BY t.created_at, t.rowid
