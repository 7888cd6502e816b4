-- Contract C: one worker with its report (store::workers::col), by primary key.
SELECT {worker_row}, {report_row}
FROM threads t LEFT JOIN reports r ON r.worker_id = t.id
WHERE t.id = ?1 AND t.coordinator_id IS NOT NULL AND t.spawn_key IS NOT NULL
