-- Contract C: every worker of one coordinator, hidden ones included, oldest first (a range of
-- the threads_by_spawn_key index; spawn_key IS NOT NULL lets the partial index serve).
SELECT {worker_row}, {report_row}
FROM threads t LEFT JOIN reports r ON r.worker_id = t.id
WHERE t.coordinator_id = ?1 AND t.spawn_key IS NOT NULL
ORDER BY t.created_at, t.id
