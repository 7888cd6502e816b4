-- The threads of one root session's tree at or below the key range [?2, ?3) (the whole tree:
-- '/' and '0'), in tree order, each with its own usage and its subtree's: the subtree_usage
-- view pushed down to that range of thread_places_by_key, and primary-key lookups.
SELECT {usage_tree_thread_row}
FROM subtree_usage s
JOIN thread_places p ON p.thread_id = s.thread_id
JOIN threads t ON t.id = s.thread_id
JOIN managers m ON m.id = t.manager_id
JOIN thread_usage u ON u.thread_id = s.thread_id
WHERE s.root_session = ?1 AND s.tree_key >= ?2 AND s.tree_key < ?3
ORDER BY s.tree_key
