-- agent_stop of a thread that is not working (completed, paused, failed or already stopped):
-- stopped at once, its output removed (its error, if any, stays). No run ends, so no notice.
UPDATE threads
SET agent_state = 'stopped', status_text = :status, output = NULL, agent_pause_requested = 0,
    agent_stop_requested = 0, updated_at = :at, agent_timeout_ms = NULL, agent_timeout_at = NULL
WHERE id = :id AND agent_state IN ('completed', 'paused', 'failed', 'stopped')
