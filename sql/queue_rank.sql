-- The queue of a manager, in order: every row still waiting for a slot with its position
-- (1 = launched next). Rank by rowid, the reservation order (threads_queue_waiting).
SELECT {queue_waiting_row}
FROM threads
WHERE manager_id = ?1 AND queued_at IS NOT NULL AND dequeued_at IS NULL AND status = 'live'
ORDER BY rowid
