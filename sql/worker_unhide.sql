-- RPC restore: sets the hidden override to 0 for every hidden contract C worker of the given
-- coordinators (:ids, a JSON array). Hidden = the override when set, else a PASS or
-- PASS WITH NOTES report. Seeks threads_by_spawn_key per id, like worker_views.sql.
UPDATE threads SET hidden = 0, updated_at = :now
WHERE coordinator_id IN (SELECT value FROM json_each(:ids))
  AND coordinator_id IS NOT NULL
  AND spawn_key IS NOT NULL
  AND EXISTS (SELECT 1 FROM managers m WHERE m.id = threads.manager_id AND m.contract = 'worker')
  AND coalesce(hidden,
               (SELECT r.verdict IN ('PASS', 'PASS WITH NOTES') FROM reports r
                WHERE r.worker_id = threads.id),
               0) = 1
