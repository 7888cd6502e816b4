-- A working thread's status line (agent_update).
UPDATE threads SET status_text = :status, updated_at = :at
WHERE id = :id AND agent_state IN ('starting', 'running')
