-- Contract C's queue (THREADBASE_QUEUE=1): claims the free worker slots of a coordinator
-- (`:max` = THREADBASE_MAX_WORKERS minus the slots held, counted as sql/worker_slots_used.sql
-- counts them) for its oldest waiting workers, in the transaction that counts them; their
-- launch follows.
UPDATE threads SET dequeued_at = :at, phase = 'starting', updated_at = :at
WHERE id IN (
    SELECT id FROM threads
    WHERE manager_id = :manager AND queued_at IS NOT NULL AND dequeued_at IS NULL
      AND status = 'live'
    ORDER BY rowid
    LIMIT max(0, :max - (
        SELECT count(*) FROM threads t
        WHERE t.coordinator_id = :coordinator AND t.spawn_key IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM reports r WHERE r.worker_id = t.id)
          AND coalesce(t.outcome,
                       CASE WHEN t.status = 'closed' THEN CASE WHEN t.exit_kind = 'failed' THEN 'failed' ELSE 'interrupted' END END,
                       '') NOT IN ('failed', 'interrupted')
          AND NOT (t.queued_at IS NOT NULL AND t.dequeued_at IS NULL AND t.status = 'live')))
)
