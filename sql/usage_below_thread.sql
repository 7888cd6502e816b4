-- The spend below a managed thread's own Pi session: its subtree in every manager of the tree
-- without the thread itself (the subtree_usage view for one thread, one range of
-- thread_places_by_key, and the thread's thread_usage primary-key row).
SELECT {usage_below_thread_row}
FROM subtree_usage s JOIN thread_usage u ON u.thread_id = s.thread_id
WHERE s.thread_id = ?1
