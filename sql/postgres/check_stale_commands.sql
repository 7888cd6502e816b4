-- sql/check_stale_commands.sql on PostgreSQL: no INDEXED BY (an index hint SQLite needs;
-- PostgreSQL's planner chooses the index).
SELECT c.id, c.thread_id, t.path, c.kind, c.state,
       t.owner_pid, t.owner_started_at, m.owner_pid, m.owner_started_at
FROM commands c
JOIN threads t ON t.id = c.thread_id
JOIN managers m ON m.id = t.manager_id
WHERE c.state = 'pending' AND t.status = 'closed'
UNION ALL
SELECT c.id, c.thread_id, t.path, c.kind, c.state,
       t.owner_pid, t.owner_started_at, m.owner_pid, m.owner_started_at
FROM commands c
JOIN threads t ON t.id = c.thread_id
JOIN managers m ON m.id = t.manager_id
WHERE c.state = 'running'
ORDER BY 1
