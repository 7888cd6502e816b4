-- Contract B: stops a thread still waiting in the queue: closed and stopped, never launched.
UPDATE threads
SET status = 'closed', phase = 'idle', exit_kind = 'stopped',
    exit_message = 'Stopped while queued; never launched.', agent_state = 'stopped',
    status_text = :status, output = NULL, error = 'Subagent run aborted', updated_at = :at
WHERE id = :id AND status = 'live' AND queued_at IS NOT NULL AND dequeued_at IS NULL
  AND launch_seq = 0
