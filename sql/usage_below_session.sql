-- The spend below a root Pi session: every thread of its tree (tree_usage primary key).
SELECT {spend_row}
FROM tree_usage WHERE root_session = ?1
