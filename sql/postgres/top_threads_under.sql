-- sql/top_threads_under.sql on PostgreSQL: a plain JOIN for SQLite's CROSS JOIN … ON (which
-- only fixes SQLite's join order).
SELECT {top_row}
FROM managers m JOIN threads t ON t.manager_id = m.id
LEFT JOIN reports r ON r.worker_id = t.id
WHERE t.sort_key >= :key AND t.sort_key < :hi AND (t.sort_key = :key OR t.sort_key > :lo)
ORDER BY m.id, t.sort_key
