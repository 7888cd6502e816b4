-- Records a stop request on a working thread; it settles as stopped when its run ends.
UPDATE threads SET agent_stop_requested = 1, status_text = :status, updated_at = :at
WHERE id = :id AND agent_state IN ('starting', 'running')
