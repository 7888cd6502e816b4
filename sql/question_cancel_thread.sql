-- Cancels every pending question of a thread (its process ended: a stop, an exit, a restore),
-- in the transaction that records the close (ui_requests_pending).
UPDATE ui_requests SET state = 'cancelled', answered_at = :at, answered_by = :by
WHERE thread_id = :thread AND state = 'pending'
