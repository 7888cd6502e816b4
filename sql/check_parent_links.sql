-- `threadbase check`: threads whose parent_id names no thread, a thread at another path than
-- parent_path, or a thread of another manager that is not this manager's own thread (a nested
-- serve's threads name the thread it runs in, self_thread_id, which its parent manager owns).
-- Primary-key lookup per linked row.
SELECT {check_parent_link_row}
FROM threads c
JOIN managers m ON m.id = c.manager_id
LEFT JOIN threads p ON p.id = c.parent_id
WHERE c.parent_id IS NOT NULL
  AND (p.id IS NULL OR p.path IS DISTINCT FROM c.parent_path
       OR NOT (p.manager_id = c.manager_id OR p.id IS NOT DISTINCT FROM m.self_thread_id))
