-- sql/worker_activity_since.sql on PostgreSQL: a comparison is a boolean here, which max does
-- not take: each is made 1 or 0 first.
SELECT coalesce(max(seq), ?2),
       coalesce(max(CASE WHEN type IN ('turn_started', 'turn_completed', 'assistant_message',
                                       'tool_started', 'tool_completed', 'thread_error')
                         THEN 1 ELSE 0 END), 0),
       coalesce(max(CASE WHEN type = 'thread_error' THEN 1 ELSE 0 END), 0)
FROM thread_events
WHERE thread_id = ?1 AND seq > ?2
