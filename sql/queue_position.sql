-- One row's position in its manager's queue (1 = launched next); no row when it is not waiting.
-- Counts the waiting rows of its manager reserved before it (threads_queue_waiting).
SELECT (SELECT count(*) FROM threads q
        WHERE q.manager_id = t.manager_id AND q.queued_at IS NOT NULL AND q.dequeued_at IS NULL
          AND q.status = 'live' AND q.rowid <= t.rowid)
FROM threads t
WHERE t.id = ?1 AND t.queued_at IS NOT NULL AND t.dequeued_at IS NULL AND t.status = 'live'
