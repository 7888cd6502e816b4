-- The web view under a filter (parameters as sql/web_page_filtered.sql's ?4..?8, here ?1..?5):
-- how many threads of each root session's tree match, in one pass over thread_places_by_key
-- (every thread read by primary key: a filter on a glob or substring has no index).
-- Issue 50: the last parameter is the host that holds (or held) a thread (its serve's, else its
-- manager's), or NULL for every host.
SELECT {web_count_row}
FROM thread_places p INDEXED BY thread_places_by_key
CROSS JOIN threads t ON t.id = p.thread_id
CROSS JOIN managers m ON m.id = t.manager_id
WHERE (?1 = 'all' OR t.status = ?1)
  AND (?2 = 'all' OR (?2 = 'archived') = (t.archived = 1 OR t.hidden IS 1))
  AND (?3 = 'all' OR m.contract = ?3)
  AND (?4 IS NULL OR t.path GLOB ?4)
  AND (?5 IS NULL OR instr(lower(t.path), lower(?5)) > 0)
  AND (?6 IS NULL OR (CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END) = ?6)
GROUP BY p.root_session
