-- sql/worker_queue_claim.sql on PostgreSQL: two-argument max is greatest (and :max needs its
-- type).
UPDATE threads SET dequeued_at = :at, phase = 'starting', updated_at = :at
WHERE id IN (
    SELECT id FROM threads
    WHERE manager_id = :manager AND queued_at IS NOT NULL AND dequeued_at IS NULL
      AND status = 'live'
    ORDER BY rowid
    LIMIT greatest(0, CAST(:max AS bigint) - (
        SELECT count(*) FROM threads t
        WHERE t.coordinator_id = :coordinator AND t.spawn_key IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM reports r WHERE r.worker_id = t.id)
          AND coalesce(t.outcome,
                       CASE WHEN t.status = 'closed' THEN CASE WHEN t.exit_kind = 'failed' THEN 'failed' ELSE 'interrupted' END END,
                       '') NOT IN ('failed', 'interrupted')
          AND NOT (t.queued_at IS NOT NULL AND t.dequeued_at IS NULL AND t.status = 'live')))
)
