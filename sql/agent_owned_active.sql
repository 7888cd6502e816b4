-- Working contract B threads this serve launched (partial index threads_agent_active), for the
-- shutdown pass that settles them as stopped.
SELECT id FROM threads
WHERE manager_id = ?1 AND agent_state IN ('starting', 'running')
  AND owner_pid = ?2 AND owner_started_at = ?3
  -- On this host and boot: a serve elsewhere may have the same pid and start.
  AND (host_id IS NULL OR host_id = ?4) AND (boot_id IS NULL OR boot_id = ?5)
