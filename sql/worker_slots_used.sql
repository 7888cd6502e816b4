-- Contract C slot limit: workers of a coordinator with no report whose outcome (stored, else
-- derived from a closed process) is not failed or interrupted. Hidden workers and workers that
-- succeeded without reporting count. A queued worker still waiting for a slot
-- (THREADBASE_QUEUE=1) holds none.
SELECT count(*)
FROM threads t
WHERE t.coordinator_id = ?1 AND t.spawn_key IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM reports r WHERE r.worker_id = t.id)
  AND coalesce(t.outcome,
               CASE WHEN t.status = 'closed' THEN CASE WHEN t.exit_kind = 'failed' THEN 'failed' ELSE 'interrupted' END END,
               '') NOT IN ('failed', 'interrupted')
  AND NOT (t.queued_at IS NOT NULL AND t.dequeued_at IS NULL AND t.status = 'live')
