-- Records a stop request on a working thread; it settles as stopped when its run ends. Its
-- report-only timer is cleared (a stopping thread gets no timeout notice).
UPDATE threads SET agent_stop_requested = 1, status_text = :status, updated_at = :at,
    agent_timeout_ms = NULL, agent_timeout_at = NULL
WHERE id = :id AND agent_state IN ('starting', 'running')
