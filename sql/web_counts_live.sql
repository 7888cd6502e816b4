-- The web view's counts per tree under a filter that keeps live threads only (?1 = 'live'; the
-- other parameters as sql/web_counts_filtered.sql's): the live threads from the partial index
-- threads_live_by_sort_key, each placed by primary key, so the cost grows with the live
-- threads only.
-- Issue 50: the last parameter is the host filter, as sql/web_page_filtered.sql's.
SELECT {web_count_row}
FROM threads t INDEXED BY threads_live_by_sort_key
CROSS JOIN thread_places p ON p.thread_id = t.id
CROSS JOIN managers m ON m.id = t.manager_id
WHERE t.status = 'live' AND ?1 = 'live'
  AND (?2 = 'all' OR (?2 = 'archived') = (t.archived = 1 OR t.hidden IS 1))
  AND (?3 = 'all' OR m.contract = ?3)
  AND (?4 IS NULL OR t.path GLOB ?4)
  AND (?5 IS NULL OR instr(lower(t.path), lower(?5)) > 0)
  AND (?6 IS NULL OR (CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END) = ?6)
GROUP BY p.root_session
