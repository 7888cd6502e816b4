-- A thread's retained events, oldest first.
SELECT {event_row} FROM thread_events e WHERE thread_id = ?1 ORDER BY seq
