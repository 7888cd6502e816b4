-- The web view's page under a filter that keeps live threads only (?4 = 'live'; the other
-- parameters as sql/web_page_filtered.sql's): the live threads read from the partial index
-- threads_live_by_sort_key (it holds live rows only), each placed by primary key, those of
-- root ?1 that pass the other filters sorted by tree key. Its cost grows with the live
-- threads, not with the tree's closed ones.
-- Issue 50: the last parameter is the host filter, as sql/web_page_filtered.sql's.
SELECT {web_row}
FROM threads t INDEXED BY threads_live_by_sort_key
CROSS JOIN thread_places p ON p.thread_id = t.id
CROSS JOIN managers m ON m.id = t.manager_id
LEFT JOIN thread_usage u ON u.thread_id = t.id
WHERE t.status = 'live' AND ?4 = 'live' AND p.root_session = ?1
  AND (?5 = 'all' OR (?5 = 'archived') = (t.archived = 1 OR t.hidden IS 1))
  AND (?6 = 'all' OR m.contract = ?6)
  AND (?7 IS NULL OR t.path GLOB ?7)
  AND (?8 IS NULL OR instr(lower(t.path), lower(?8)) > 0)
  AND (?9 IS NULL OR (CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END) = ?9)
ORDER BY p.tree_key
LIMIT ?3 OFFSET ?2
