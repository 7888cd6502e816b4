-- Whether a manager already holds a path (the UNIQUE (manager_id, path) index).
SELECT EXISTS (SELECT 1 FROM threads WHERE manager_id = ?1 AND path = ?2)
