-- A thread's retained events, oldest first.
SELECT seq, at, type, data FROM thread_events WHERE thread_id = ?1 ORDER BY seq
