-- sql/web_page.sql on PostgreSQL: a plain JOIN for SQLite's CROSS JOIN … ON (which only fixes
-- SQLite's join order); no INDEXED BY (an index hint SQLite needs; PostgreSQL's planner chooses
-- the index).
SELECT {web_row}
FROM (SELECT thread_id, tree_key FROM thread_places
      WHERE root_session = ?1 ORDER BY tree_key LIMIT ?3 OFFSET ?2) k
JOIN thread_places p ON p.thread_id = k.thread_id
JOIN threads t ON t.id = k.thread_id
JOIN managers m ON m.id = t.manager_id
LEFT JOIN thread_usage u ON u.thread_id = k.thread_id
ORDER BY k.tree_key
