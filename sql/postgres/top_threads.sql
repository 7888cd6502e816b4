-- sql/top_threads.sql on PostgreSQL: a plain JOIN for SQLite's CROSS JOIN … ON (which only
-- fixes SQLite's join order).
SELECT {top_row}
FROM managers m JOIN threads t ON t.manager_id = m.id
LEFT JOIN reports r ON r.worker_id = t.id
ORDER BY m.id, t.sort_key
