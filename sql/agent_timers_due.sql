-- The armed timers of a serve's threads whose deadline has passed, with what their notice is
-- written from (partial index threads_agent_timers: one range of owner_pid and deadline).
SELECT {agent_due_timer_row}
FROM threads
WHERE owner_pid = :pid AND agent_timeout_at IS NOT NULL AND agent_timeout_at <= :now
  AND owner_started_at = :started
  -- On this host and boot: a serve elsewhere may have the same pid and start.
  AND (host_id IS NULL OR host_id = :host) AND (boot_id IS NULL OR boot_id = :boot)
ORDER BY agent_timeout_at
