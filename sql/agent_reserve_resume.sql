-- Reserves the next run of a settled thread for this serve (exactly one of concurrent
-- resumers wins): back to starting, output and error cleared, requests cleared.
UPDATE threads
SET agent_state = 'starting', status_text = :status, output = NULL, error = NULL,
    agent_pause_requested = 0, agent_stop_requested = 0, owner_pid = :owner_pid,
    owner_started_at = :owner_started, host_id = :host_id, boot_id = :boot_id,
    updated_at = :at
WHERE id = :id AND agent_state NOT IN ('starting', 'running')
