-- Contract B's queue (THREADBASE_QUEUE=1): claims the free concurrency slots of a registry
-- (`:max` = PI_SUBAGENTS_MAX_CONCURRENT minus the working threads that hold one) for its oldest
-- waiting rows, in the transaction that counts them; their launch follows.
UPDATE threads SET dequeued_at = :at, phase = 'starting', status_text = 'Starting', updated_at = :at
WHERE id IN (
    SELECT id FROM threads
    WHERE manager_id = :manager AND queued_at IS NOT NULL AND dequeued_at IS NULL
      AND status = 'live'
    ORDER BY rowid
    LIMIT max(0, :max - (SELECT count(*) FROM threads
                         WHERE manager_id = :manager AND agent_state IN ('starting', 'running')
                           AND (queued_at IS NULL OR dequeued_at IS NOT NULL)))
)
