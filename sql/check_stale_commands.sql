-- `threadbase check`: pending control commands of closed threads, with the thread's and the
-- manager's owner. Reads the partial index commands_pending.
SELECT c.id, c.thread_id, t.path, c.kind, m.session_id,
       t.owner_pid, t.owner_started_at, m.owner_pid, m.owner_started_at
FROM commands c
JOIN threads t ON t.id = c.thread_id
JOIN managers m ON m.id = t.manager_id
WHERE c.state = 'pending' AND t.status = 'closed'
ORDER BY c.id
