-- Contract C run tracking: the newest event seq of a thread after ?2, whether any of those
-- events shows model activity (a run happened), and whether one is an error.
SELECT {worker_activity_row}
FROM thread_events
WHERE thread_id = ?1 AND seq > ?2
