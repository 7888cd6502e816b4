-- Control requests (emergency stop, interrupt) for threads whose process this serve owns.
SELECT c.id, c.thread_id, c.kind
FROM commands c JOIN threads t ON t.id = c.thread_id
WHERE c.state = 'pending' AND t.owner_pid = ?1 AND t.owner_started_at = ?2 AND t.status = 'live'
ORDER BY c.id
