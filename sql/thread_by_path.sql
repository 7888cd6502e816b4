-- Reference resolution step 2: an exact canonical path within one manager
-- (the UNIQUE (manager_id, path) index).
SELECT {thread_row}
FROM threads t
WHERE manager_id = ?1 AND path = ?2
