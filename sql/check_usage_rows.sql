-- `threadbase check`: threads without their place in the tree (thread_places) or their usage
-- row (thread_usage), which the insert trigger writes with every thread; primary-key lookups.
SELECT {check_usage_rows_row}
FROM threads t
LEFT JOIN thread_places p ON p.thread_id = t.id
LEFT JOIN thread_usage u ON u.thread_id = t.id
WHERE p.thread_id IS NULL OR u.thread_id IS NULL
