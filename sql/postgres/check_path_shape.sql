-- sql/check_path_shape.sql on PostgreSQL: `IS NOT` (null-safe) is IS DISTINCT FROM here.
SELECT id, path, parent_path, task_name
FROM threads
WHERE path IS DISTINCT FROM coalesce(parent_path, '') || '/' || task_name
