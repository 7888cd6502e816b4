-- One thread's own usage (thread_usage primary key).
SELECT {usage_row}
FROM thread_usage WHERE thread_id = ?1
