-- `threadbase check`: threads whose parent_id names no thread, a thread of another manager, or a
-- thread at another path than parent_path (primary-key lookup per linked row).
SELECT c.id, c.path, c.parent_id, c.parent_path, p.id, p.manager_id = c.manager_id, p.path
FROM threads c LEFT JOIN threads p ON p.id = c.parent_id
WHERE c.parent_id IS NOT NULL
  AND (p.id IS NULL OR p.manager_id <> c.manager_id OR p.path IS NOT c.parent_path)
