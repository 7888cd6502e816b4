-- Reserves :count event sequence numbers for a thread and returns the last one.
UPDATE threads SET last_seq = last_seq + :count, last_event_at = :at, updated_at = :at
WHERE id = :thread_id
RETURNING last_seq
