-- The id of the thread at a path of a manager (the UNIQUE (manager_id, path) index).
SELECT id FROM threads WHERE manager_id = ?1 AND path = ?2
