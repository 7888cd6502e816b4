-- sql/notices_pending.sql on PostgreSQL: a plain JOIN for SQLite's CROSS JOIN … ON (which only
-- fixes SQLite's join order); no INDEXED BY (an index hint SQLite needs; PostgreSQL's planner
-- chooses the index).
SELECT {notice_row}
FROM mailbox mb
JOIN threads t ON t.id = mb.thread_id
JOIN managers m ON m.id = t.manager_id
WHERE mb.state = 'pending' AND mb.direction = 'to_parent' AND m.session_id = ?1
  AND mb.recipient_path IS NULL
ORDER BY mb.id
