-- sql/check_parent_links.sql on PostgreSQL: `IS` / `IS NOT` between values (SQLite's
-- null-safe comparisons) are IS NOT DISTINCT FROM / IS DISTINCT FROM here.
SELECT c.id, c.path, c.parent_id, c.parent_path, p.id,
       p.manager_id = c.manager_id OR p.id IS NOT DISTINCT FROM m.self_thread_id, p.path
FROM threads c
JOIN managers m ON m.id = c.manager_id
LEFT JOIN threads p ON p.id = c.parent_id
WHERE c.parent_id IS NOT NULL
  AND (p.id IS NULL OR p.path IS DISTINCT FROM c.parent_path
       OR NOT (p.manager_id = c.manager_id OR p.id IS NOT DISTINCT FROM m.self_thread_id))
