-- Contract C threads.restore: every hidden worker (override 1, or no override and a PASS /
-- PASS WITH NOTES report) of the coordinators in the JSON array ?1 gets the override 0.
UPDATE threads
SET hidden = 0, updated_at = ?2
WHERE coordinator_id IN (SELECT value FROM json_each(?1)) AND spawn_key IS NOT NULL
  AND (hidden = 1
       OR (hidden IS NULL AND EXISTS (SELECT 1 FROM reports r WHERE r.worker_id = threads.id
                                      AND r.verdict IN ('PASS', 'PASS WITH NOTES'))))
