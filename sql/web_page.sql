-- The web view's page of one root session's tree, unfiltered: rows ?2.. of the tree in tree
-- order (at most ?3). The offset and limit walk thread_places_by_key (root_session, tree_key),
-- which covers the inner select, so the rows skipped cost one index entry each and no table
-- read; only the page's rows are then read by primary key (thread_places, threads, managers,
-- thread_usage).
SELECT {web_row}
FROM (SELECT thread_id, tree_key FROM thread_places INDEXED BY thread_places_by_key
      WHERE root_session = ?1 ORDER BY tree_key LIMIT ?3 OFFSET ?2) k
CROSS JOIN thread_places p ON p.thread_id = k.thread_id
CROSS JOIN threads t ON t.id = k.thread_id
CROSS JOIN managers m ON m.id = t.manager_id
LEFT JOIN thread_usage u ON u.thread_id = k.thread_id
ORDER BY k.tree_key
