-- Contract C (threads.snapshot / threads.restore): the workers of the coordinators in the JSON
-- array ?1, oldest first; one index range per coordinator.
SELECT * FROM worker_rows
WHERE coordinator_id IN (SELECT value FROM json_each(?1)) AND spawn_key IS NOT NULL
ORDER BY created_at, id
