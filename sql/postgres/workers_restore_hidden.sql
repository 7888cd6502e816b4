-- sql/workers_restore_hidden.sql on PostgreSQL: the JSON array ?1 is read with
-- jsonb_array_elements_text.
UPDATE threads
SET hidden = 0, updated_at = ?2
WHERE coordinator_id IN (SELECT jsonb_array_elements_text(CAST(?1 AS jsonb))) AND spawn_key IS NOT NULL
  AND (hidden = 1
       OR (hidden IS NULL AND EXISTS (SELECT 1 FROM reports r WHERE r.worker_id = threads.id
                                      AND r.verdict IN ('PASS', 'PASS WITH NOTES'))))
