-- Whether a row is queued and not yet launched (waiting for a slot, or claimed and launching).
SELECT queued_at IS NOT NULL AND launch_seq = 0 AND status = 'live', dequeued_at IS NOT NULL
FROM threads WHERE id = ?1
