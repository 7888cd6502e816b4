-- Control requests (emergency stop, interrupt) for threads whose process this serve owns.
-- Read from the partial index commands_pending (only pending rows; done commands stay in the
-- table), each row's thread then found by primary key.
SELECT c.id, c.thread_id, c.kind
FROM commands c INDEXED BY commands_pending CROSS JOIN threads t ON t.id = c.thread_id
WHERE c.state = 'pending' AND t.owner_pid = ?1 AND t.owner_started_at = ?2 AND t.status = 'live'
ORDER BY c.id
