-- The earliest armed deadline among the threads a serve holds (partial index
-- threads_agent_timers: owner_pid, then the deadline in order).
SELECT min(agent_timeout_at) AS next_at FROM threads
WHERE owner_pid = :pid AND agent_timeout_at IS NOT NULL AND owner_started_at = :started
  -- On this host and boot: a serve elsewhere may have the same pid and start.
  AND (host_id IS NULL OR host_id = :host) AND (boot_id IS NULL OR boot_id = :boot)
