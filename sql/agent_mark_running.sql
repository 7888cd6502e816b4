-- The prompt reached the child: starting → running (a stop requested meanwhile keeps its
-- "Stopping" status).
UPDATE threads SET agent_state = 'running',
    status_text = CASE WHEN agent_stop_requested THEN status_text ELSE :status END,
    updated_at = :at
WHERE id = :id AND agent_state = 'starting'
