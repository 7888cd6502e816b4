-- Contract C (threads.snapshot / threads.restore): the workers of the coordinators in the JSON
-- array ?1, oldest first; one index range per coordinator.
SELECT {worker_row}, {report_row}
FROM threads t LEFT JOIN reports r ON r.worker_id = t.id
WHERE t.coordinator_id IN (SELECT value FROM json_each(?1)) AND t.spawn_key IS NOT NULL
ORDER BY t.created_at, t.id
