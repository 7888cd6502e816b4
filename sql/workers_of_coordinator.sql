-- Contract C: every worker of one coordinator, hidden ones included, oldest first (a range of
-- the threads_by_spawn_key index; spawn_key IS NOT NULL lets the partial index serve).
SELECT * FROM worker_rows
WHERE coordinator_id = ?1 AND spawn_key IS NOT NULL
ORDER BY created_at, id
