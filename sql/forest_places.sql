-- `threadbase tree` / `list` / `top`: every placed thread in whole-tree order (root session,
-- then tree key: a parent before its descendants across every manager of the tree), with its
-- level and manager (thread_places_by_key in order, then primary-key lookups).
SELECT {forest_place_row}
FROM thread_places p
JOIN threads t ON t.id = p.thread_id
JOIN managers m ON m.id = t.manager_id
ORDER BY p.root_session, p.tree_key
