-- `threadbase check`: threads whose path is not parent_path + '/' + task_name.
SELECT {check_path_shape_row}
FROM threads
WHERE path IS NOT coalesce(parent_path, '') || '/' || task_name
