-- Every root session's whole-tree total (tree_usage, in primary-key order).
SELECT {usage_tree_row}, {usage_row}
FROM tree_usage ORDER BY root_session
