-- sql/web_page_live.sql on PostgreSQL: no INDEXED BY (an index hint SQLite needs; PostgreSQL's
-- planner chooses the index); a plain JOIN for SQLite's CROSS JOIN … ON (which only fixes
-- SQLite's join order); `IS 1` (SQLite's null-safe equality) is IS NOT DISTINCT FROM; GLOB is
-- the function threadbase_glob (migrations_postgres/V1); a parameter first seen in `IS NULL`
-- needs its type; instr is strpos.
-- Issue 50: the last parameter is the host filter, as sql/web_page_filtered.sql's.
SELECT {web_row}
FROM threads t
JOIN thread_places p ON p.thread_id = t.id
JOIN managers m ON m.id = t.manager_id
LEFT JOIN thread_usage u ON u.thread_id = t.id
WHERE t.status = 'live' AND ?4 = 'live' AND p.root_session = ?1
  AND (?5 = 'all' OR (?5 = 'archived') = (t.archived = 1 OR t.hidden IS NOT DISTINCT FROM 1))
  AND (?6 = 'all' OR m.contract = ?6)
  AND (CAST(?7 AS text) IS NULL OR threadbase_glob(?7, t.path))
  AND (CAST(?8 AS text) IS NULL OR strpos(lower(t.path), lower(?8)) > 0)
  AND (CAST(?9 AS text) IS NULL OR (CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END) = ?9)
ORDER BY p.tree_key
LIMIT ?3 OFFSET ?2
