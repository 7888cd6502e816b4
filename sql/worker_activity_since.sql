-- Contract C run tracking: the newest event seq of a thread after ?2, whether any of those
-- events shows model activity (a run happened), and whether one is an error.
SELECT coalesce(max(seq), ?2),
       coalesce(max(type IN ('turn_started', 'turn_completed', 'assistant_message', 'tool_started',
                             'tool_completed', 'thread_error')), 0),
       coalesce(max(type = 'thread_error'), 0)
FROM thread_events
WHERE thread_id = ?1 AND seq > ?2
