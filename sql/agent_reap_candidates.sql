-- The threads `reap` may forget in a registry, oldest createdAt first: completed, not reaped,
-- and with no descendant that stays (every descendant not yet reaped is completed too, so none
-- is working and none stays beneath it). threads_agent_by_manager holds the registry's
-- contract B rows; each candidate's descendants are one range of threads_by_sort_key.
SELECT {agent_reaped_row} FROM threads t
WHERE t.manager_id = :registry AND t.agent_state = 'completed' AND t.agent_reaped_at IS NULL
  AND NOT EXISTS (
      SELECT 1 FROM threads d
      WHERE d.manager_id = t.manager_id
        AND d.sort_key > t.sort_key || '/' AND d.sort_key < t.sort_key || '0'
        AND d.agent_reaped_at IS NULL AND d.agent_state IS NOT 'completed')
ORDER BY t.created_at, t.rowid
