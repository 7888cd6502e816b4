-- `reap` forgets one completed thread: marked reaped (the row stays for SQL and usage), its
-- report-only timer cleared. A thread resumed meanwhile (no longer completed) is left alone.
UPDATE threads SET agent_reaped_at = :at, agent_timeout_ms = NULL, agent_timeout_at = NULL
WHERE id = :id AND agent_state = 'completed' AND agent_reaped_at IS NULL
