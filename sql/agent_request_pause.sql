-- Records a pause request (agent_pause) on a working thread; its status becomes the reason.
UPDATE threads SET agent_pause_requested = 1, status_text = :status, updated_at = :at
WHERE id = :id AND agent_state IN ('starting', 'running')
