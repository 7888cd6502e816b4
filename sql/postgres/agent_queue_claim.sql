-- sql/agent_queue_claim.sql on PostgreSQL: two-argument max is greatest (and :max needs its
-- type).
UPDATE threads SET dequeued_at = :at, phase = 'starting', status_text = 'Starting', updated_at = :at
WHERE id IN (
    SELECT id FROM threads
    WHERE manager_id = :manager AND queued_at IS NOT NULL AND dequeued_at IS NULL
      AND status = 'live'
    ORDER BY rowid
    LIMIT greatest(0, CAST(:max AS bigint) - (SELECT count(*) FROM threads
                         WHERE manager_id = :manager AND agent_state IN ('starting', 'running')
                           AND (queued_at IS NULL OR dequeued_at IS NOT NULL)))
)
