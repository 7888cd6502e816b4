-- `threadbase top` showing one subtree: the thread at a path (:key, its sort key) and every
-- thread below it (:lo < sort_key < :hi, paths::descendant_range), in every manager
-- (sql/view_top_rows.sql). One range of threads_by_sort_key per manager, already in order.
SELECT * FROM top_rows
WHERE sort_key >= :key AND sort_key < :hi AND (sort_key = :key OR sort_key > :lo)
ORDER BY manager_id, sort_key
