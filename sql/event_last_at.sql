-- The time of a thread's latest event, so appended events never go back in time: seq order
-- and time order agree. One primary-key seek (thread_id, seq DESC).
SELECT at FROM thread_events WHERE thread_id = ?1 ORDER BY seq DESC LIMIT 1
