-- `threadbase check`: commands nobody will finish: pending ones of closed threads, and claimed
-- (running) ones, each with the thread's and the manager's owner (the check reports those
-- whose owners are both gone). Reads the partial indexes commands_pending and commands_running.
SELECT {check_stale_command_row}, {check_owners_row}
FROM commands c INDEXED BY commands_pending
JOIN threads t ON t.id = c.thread_id
JOIN managers m ON m.id = t.manager_id
WHERE c.state = 'pending' AND t.status = 'closed'
UNION ALL
SELECT {check_stale_command_row}, {check_owners_row}
FROM commands c INDEXED BY commands_running
JOIN threads t ON t.id = c.thread_id
JOIN managers m ON m.id = t.manager_id
WHERE c.state = 'running'
ORDER BY 1
