-- Claims the free slots of a manager for its oldest waiting rows, in the transaction that
-- counts them: as many rows as `:max` minus the live rows holding a slot, oldest first. A
-- claimed row holds its slot from here on; its launch follows (queue_to_launch.sql).
UPDATE threads SET dequeued_at = :at, phase = 'starting', updated_at = :at
WHERE id IN (
    SELECT id FROM threads
    WHERE manager_id = :manager AND queued_at IS NOT NULL AND dequeued_at IS NULL
      AND status = 'live'
    ORDER BY rowid
    LIMIT max(0, :max - (SELECT count(*) FROM threads
                         WHERE manager_id = :manager AND status = 'live'
                           AND (queued_at IS NULL OR dequeued_at IS NOT NULL)))
)
