-- The prompt reached the child: starting → running.
UPDATE threads SET agent_state = 'running', status_text = :status, updated_at = :at
WHERE id = :id AND agent_state = 'starting'
