-- A thread and its descendants in spawn (rowid) order: the thread by the UNIQUE
-- (manager_id, path) index and one range of threads_by_sort_key (?2 = the thread's path,
-- ?3/?4 = the descendant range of its sort key) into a rowid list, read back in order.
SELECT {agent_row}
FROM threads
WHERE rowid IN (
    SELECT rowid FROM threads WHERE manager_id = ?1 AND path = ?2
    UNION ALL
    SELECT rowid FROM threads WHERE manager_id = ?1 AND sort_key > ?3 AND sort_key < ?4
) AND agent_reaped_at IS NULL
ORDER BY rowid
