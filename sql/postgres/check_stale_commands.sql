-- sql/check_stale_commands.sql on PostgreSQL: no INDEXED BY (an index hint SQLite needs;
-- PostgreSQL's planner chooses the index).
SELECT {check_stale_command_row}, {check_owners_row}
FROM commands c
JOIN threads t ON t.id = c.thread_id
JOIN managers m ON m.id = t.manager_id
WHERE c.state = 'pending' AND t.status = 'closed'
UNION ALL
SELECT {check_stale_command_row}, {check_owners_row}
FROM commands c
JOIN threads t ON t.id = c.thread_id
JOIN managers m ON m.id = t.manager_id
WHERE c.state = 'running'
ORDER BY 1
