-- Contract C slot limit: workers of a coordinator with no report whose outcome (stored, else
-- derived from a closed process) is not failed or interrupted. Hidden workers and workers that
-- succeeded without reporting count.
SELECT count(*)
FROM threads t
WHERE t.coordinator_id = ?1 AND t.spawn_key IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM reports r WHERE r.worker_id = t.id)
  AND coalesce(t.outcome,
               CASE WHEN t.status = 'closed' THEN CASE WHEN t.exit_kind = 'failed' THEN 'failed' ELSE 'interrupted' END END,
               '') NOT IN ('failed', 'interrupted')
