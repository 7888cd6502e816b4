-- Threads with one task name in any manager, for the inspection CLI.
SELECT {thread_row}
FROM threads t
WHERE task_name = ?1 ORDER BY sort_key, manager_id LIMIT ?2
