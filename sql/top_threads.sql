-- Every thread with its manager, for `threadbase top` (store::top::col; its filters are
-- applied as it draws), in manager then list order. CROSS JOIN reads the managers first, so a
-- subtree (sql/top_threads_under.sql) is one range of threads_by_sort_key per manager (else
-- SQLite walks threads_global_sort and sorts what it found).
SELECT {top_row}
FROM managers m CROSS JOIN threads t ON t.manager_id = m.id
LEFT JOIN reports r ON r.worker_id = t.id
ORDER BY m.id, t.sort_key
