-- `threadbase top` showing one subtree: the thread at a path (:key, its sort key) and every
-- thread below it (:lo < sort_key < :hi, paths::descendant_range), in every manager
-- (store::top::col). One range of threads_by_sort_key per manager, already in order.
SELECT {top_row}
FROM managers m CROSS JOIN threads t ON t.manager_id = m.id
LEFT JOIN reports r ON r.worker_id = t.id
WHERE t.sort_key >= :key AND t.sort_key < :hi AND (t.sort_key = :key OR t.sort_key > :lo)
ORDER BY m.id, t.sort_key
