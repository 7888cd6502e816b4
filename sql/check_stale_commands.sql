-- `threadbase check`: commands nobody will finish: pending ones of closed threads, and claimed
-- (running) ones, each with the thread's and the manager's owner (the check reports those
-- whose owners are both gone). Reads the partial indexes commands_pending and commands_running.
SELECT c.id, c.thread_id, t.path, c.kind, c.state,
       t.owner_pid, t.owner_started_at, m.owner_pid, m.owner_started_at
FROM commands c INDEXED BY commands_pending
JOIN threads t ON t.id = c.thread_id
JOIN managers m ON m.id = t.manager_id
WHERE c.state = 'pending' AND t.status = 'closed'
UNION ALL
SELECT c.id, c.thread_id, t.path, c.kind, c.state,
       t.owner_pid, t.owner_started_at, m.owner_pid, m.owner_started_at
FROM commands c INDEXED BY commands_running
JOIN threads t ON t.id = c.thread_id
JOIN managers m ON m.id = t.manager_id
WHERE c.state = 'running'
ORDER BY 1
