-- Closes a thread whose owner is gone with a stale exit; contract B threads come back paused.
-- Guarded by launch_seq so a thread relaunched meanwhile is left alone.
UPDATE threads
SET status = 'closed', phase = 'stale', exit_kind = 'stale', exit_code = NULL, exit_signal = NULL,
    exit_message = :message, exit_synthetic = 0, idle_started_at = NULL, updated_at = :at,
    agent_state = CASE WHEN agent_state IS NOT NULL THEN 'paused' END,
    status_text = CASE WHEN agent_state IS NOT NULL THEN :paused_status ELSE status_text END
WHERE id = :id AND status = 'live' AND launch_seq = :launch
