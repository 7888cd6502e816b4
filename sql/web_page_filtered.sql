-- The web view's page of one root session's tree under a filter (state ?4: all/live/closed;
-- visibility ?5: all/active/archived, a hidden worker counting as archived; contract ?6: all or
-- one; ?7 a GLOB on the path or NULL; ?8 a case-insensitive substring of the path or NULL):
-- rows ?2.. of the matches in tree order (at most ?3). The tree's range of
-- thread_places_by_key in order, each thread read by primary key to test it; no index can
-- answer a glob or a substring, so this reads the tree's range up to the page's end.
-- Issue 50: the last parameter is the host that holds (or held) a thread (its serve's, else its
-- manager's), or NULL for every host.
SELECT {web_row}
FROM thread_places p INDEXED BY thread_places_by_key
CROSS JOIN threads t ON t.id = p.thread_id
CROSS JOIN managers m ON m.id = t.manager_id
LEFT JOIN thread_usage u ON u.thread_id = p.thread_id
WHERE p.root_session = ?1
  AND (?4 = 'all' OR t.status = ?4)
  AND (?5 = 'all' OR (?5 = 'archived') = (t.archived = 1 OR t.hidden IS 1))
  AND (?6 = 'all' OR m.contract = ?6)
  AND (?7 IS NULL OR t.path GLOB ?7)
  AND (?8 IS NULL OR instr(lower(t.path), lower(?8)) > 0)
  AND (?9 IS NULL OR (CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END) = ?9)
ORDER BY p.tree_key
LIMIT ?3 OFFSET ?2
