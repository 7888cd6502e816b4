-- Reference resolution step 1: an exact thread id within one manager (primary key lookup).
SELECT {thread_row}
FROM threads t
WHERE id = ?1 AND manager_id = ?2
