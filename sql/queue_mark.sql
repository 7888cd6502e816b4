-- Marks a just-reserved row as queued (THREADBASE_QUEUE=1): it waits for a slot of its manager.
UPDATE threads SET queued_at = ?2, phase = 'queued' WHERE id = ?1 AND status = 'live' AND launch_seq = 0
