-- Threads at one path in any manager, for the inspection CLI (threads_global_sort index on
-- sort_key, which is a function of path).
SELECT {thread_row}
FROM threads t
WHERE sort_key = replace(?1, '_', '!') AND path = ?1 ORDER BY manager_id LIMIT ?2
