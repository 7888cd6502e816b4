-- Reference resolution step 2: an exact canonical path within one manager
-- (the UNIQUE (manager_id, path) index).
SELECT * FROM thread_rows
WHERE manager_id = ?1 AND path = ?2
