-- Ends a pending question without an answer (`timed_out` or `cancelled`), saying who ended it.
UPDATE ui_requests SET state = :state, answered_at = :at, answered_by = :by
WHERE id = :id AND state = 'pending'
