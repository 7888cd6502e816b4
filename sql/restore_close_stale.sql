-- Closes a thread whose owner is gone with a stale exit; contract B threads that were working
-- come back paused with no output (settled ones keep their state).
-- Guarded by launch_seq so a thread relaunched meanwhile is left alone.
UPDATE threads
SET status = 'closed', phase = 'stale', exit_kind = 'stale', exit_code = NULL, exit_signal = NULL,
    exit_message = :message, exit_synthetic = 0, idle_started_at = NULL, updated_at = :at,
    output = CASE WHEN agent_state IN ('starting', 'running') THEN NULL ELSE output END,
    agent_pause_requested = 0, agent_stop_requested = 0,
    agent_timeout_ms = NULL, agent_timeout_at = NULL,
    status_text = CASE WHEN agent_state IN ('starting', 'running') THEN :paused_status ELSE status_text END,
    agent_state = CASE WHEN agent_state IN ('starting', 'running') THEN 'paused' ELSE agent_state END
WHERE id = :id AND status = 'live' AND launch_seq = :launch
