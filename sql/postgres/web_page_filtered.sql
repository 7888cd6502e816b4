-- sql/web_page_filtered.sql on PostgreSQL: no INDEXED BY (an index hint SQLite needs;
-- PostgreSQL's planner chooses the index); a plain JOIN for SQLite's CROSS JOIN … ON (which
-- only fixes SQLite's join order); `IS 1` (SQLite's null-safe equality) is IS NOT DISTINCT
-- FROM; GLOB is the function threadbase_glob (migrations_postgres/V1); a parameter first seen
-- in `IS NULL` needs its type; instr is strpos.
-- Issue 50: the last parameter is the host that holds (or held) a thread (its serve's, else its
-- manager's), or NULL for every host.
SELECT {web_row}
FROM thread_places p
JOIN threads t ON t.id = p.thread_id
JOIN managers m ON m.id = t.manager_id
LEFT JOIN thread_usage u ON u.thread_id = p.thread_id
WHERE p.root_session = ?1
  AND (?4 = 'all' OR t.status = ?4)
  AND (?5 = 'all' OR (?5 = 'archived') = (t.archived = 1 OR t.hidden IS NOT DISTINCT FROM 1))
  AND (?6 = 'all' OR m.contract = ?6)
  AND (CAST(?7 AS text) IS NULL OR threadbase_glob(?7, t.path))
  AND (CAST(?8 AS text) IS NULL OR strpos(lower(t.path), lower(?8)) > 0)
  AND (CAST(?9 AS text) IS NULL OR (CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END) = ?9)
ORDER BY p.tree_key
LIMIT ?3 OFFSET ?2
