-- `threadbase check`: threads whose path is not parent_path + '/' + task_name.
SELECT id, path, parent_path, task_name
FROM threads
WHERE path IS NOT coalesce(parent_path, '') || '/' || task_name
