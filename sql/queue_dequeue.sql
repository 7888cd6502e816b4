-- Stops a row still waiting in the queue: it is closed as stopped, never launched. False (no
-- change) once a slot was claimed for it: then it is stopped as a launch.
UPDATE threads
SET status = 'closed', phase = 'idle', exit_kind = 'stopped',
    exit_message = 'Stopped while queued; never launched.', updated_at = ?2
WHERE id = ?1 AND status = 'live' AND queued_at IS NOT NULL AND dequeued_at IS NULL
  AND launch_seq = 0
