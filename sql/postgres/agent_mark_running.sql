-- sql/agent_mark_running.sql on PostgreSQL: an integer is not a condition here (`= 1`).
UPDATE threads SET agent_state = 'running',
    status_text = CASE WHEN agent_stop_requested = 1 THEN status_text ELSE :status END,
    updated_at = :at
WHERE id = :id AND agent_state = 'starting'
