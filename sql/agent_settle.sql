-- A working thread settles (completed, paused, stopped or failed); pause and stop requests are
-- spent, and its report-only timer is cleared. A thread that is not working is left alone
-- (someone settled it first).
UPDATE threads
SET agent_state = :state, status_text = coalesce(:status, status_text), output = :output,
    error = :error, agent_pause_requested = 0, agent_stop_requested = 0, updated_at = :at,
    agent_timeout_ms = NULL, agent_timeout_at = NULL
WHERE id = :id AND agent_state IN ('starting', 'running')
RETURNING {agent_settled_row}
