-- sql/check_path_shape.sql on PostgreSQL: `IS NOT` (null-safe) is IS DISTINCT FROM here.
SELECT {check_path_shape_row}
FROM threads
WHERE path IS DISTINCT FROM coalesce(parent_path, '') || '/' || task_name
