-- sql/workers_of_coordinators.sql on PostgreSQL: the JSON array ?1 is read with
-- jsonb_array_elements_text.
SELECT {worker_row}, {report_row}
FROM threads t LEFT JOIN reports r ON r.worker_id = t.id
WHERE t.coordinator_id IN (SELECT jsonb_array_elements_text(CAST(?1 AS jsonb))) AND t.spawn_key IS NOT NULL
ORDER BY t.created_at, t.id
