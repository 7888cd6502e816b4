-- `threadbase check`: (manager, path) pairs held by more than one thread (UNIQUE should forbid it).
-- Reads the (manager_id, path) unique index in order.
SELECT {check_duplicate_path_row}
FROM threads GROUP BY manager_id, path HAVING count(*) > 1
