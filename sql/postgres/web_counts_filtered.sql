-- sql/web_counts_filtered.sql on PostgreSQL: no INDEXED BY (an index hint SQLite needs;
-- PostgreSQL's planner chooses the index); a plain JOIN for SQLite's CROSS JOIN … ON (which
-- only fixes SQLite's join order); `IS 1` (SQLite's null-safe equality) is IS NOT DISTINCT
-- FROM; GLOB is the function threadbase_glob (migrations_postgres/V1); a parameter first seen
-- in `IS NULL` needs its type; instr is strpos.
-- Issue 50: the last parameter is the host that holds (or held) a thread (its serve's, else its
-- manager's), or NULL for every host.
SELECT {web_count_row}
FROM thread_places p
JOIN threads t ON t.id = p.thread_id
JOIN managers m ON m.id = t.manager_id
WHERE (?1 = 'all' OR t.status = ?1)
  AND (?2 = 'all' OR (?2 = 'archived') = (t.archived = 1 OR t.hidden IS NOT DISTINCT FROM 1))
  AND (?3 = 'all' OR m.contract = ?3)
  AND (CAST(?4 AS text) IS NULL OR threadbase_glob(?4, t.path))
  AND (CAST(?5 AS text) IS NULL OR strpos(lower(t.path), lower(?5)) > 0)
  AND (CAST(?6 AS text) IS NULL OR (CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END) = ?6)
GROUP BY p.root_session
