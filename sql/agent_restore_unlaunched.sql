-- A contract B thread reserved to run (starting/running) but without a live process, whose
-- reserving serve is gone: it comes back paused like an interrupted one.
UPDATE threads
SET agent_state = 'paused', status_text = :paused_status, output = NULL,
    agent_pause_requested = 0, agent_stop_requested = 0, updated_at = :at,
    agent_timeout_ms = NULL, agent_timeout_at = NULL
WHERE id = :id AND status = 'closed' AND agent_state IN ('starting', 'running')
