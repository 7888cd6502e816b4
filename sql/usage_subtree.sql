-- What a thread and all of its descendants spent, across every manager of its tree: the
-- subtree_usage view for one thread, one range of thread_places_by_key.
SELECT {usage_subtree_row}, {usage_row}
FROM subtree_usage WHERE thread_id = ?1
