-- The subtree totals of the web view's page: for each thread id of the JSON array ?1, its
-- subtree across every manager of its tree (itself and the keys below it: one range of
-- thread_places_by_key each, as the subtree_usage view reads it), with the thread count,
-- tokens and cost summed from thread_usage by primary key. One statement for the page.
SELECT {web_subtree_totals_row}
FROM json_each(?1) j
CROSS JOIN thread_places a ON a.thread_id = j.value
CROSS JOIN thread_places d INDEXED BY thread_places_by_key
     ON d.root_session = a.root_session
     AND d.tree_key >= a.tree_key AND d.tree_key < a.tree_key || '0'
     AND (length(d.tree_key) = length(a.tree_key)
          OR substr(d.tree_key, length(a.tree_key) + 1, 1) = '/')
CROSS JOIN thread_usage u ON u.thread_id = d.thread_id
GROUP BY a.thread_id
