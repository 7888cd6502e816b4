-- Rows of a manager whose slot is claimed but which were never launched (launch_seq 0): the
-- launches that follow a claim, and after a crash the ones the next serve of the manager makes.
SELECT id FROM threads
WHERE manager_id = ?1 AND status = 'live' AND queued_at IS NOT NULL AND dequeued_at IS NOT NULL
  AND launch_seq = 0
ORDER BY rowid
