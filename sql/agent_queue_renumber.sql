-- Contract B's queued threads say where they stand: status "Queued (position N)", N the rank
-- of the row among its registry's waiting rows (threads_queue_waiting).
UPDATE threads
SET status_text = 'Queued (position ' || (
        SELECT count(*) FROM threads q
        WHERE q.manager_id = threads.manager_id AND q.queued_at IS NOT NULL
          AND q.dequeued_at IS NULL AND q.status = 'live' AND q.rowid <= threads.rowid) || ')'
WHERE manager_id = ?1 AND queued_at IS NOT NULL AND dequeued_at IS NULL AND status = 'live'
