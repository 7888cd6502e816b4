-- Every thread with its manager, for `threadbase top` (sql/view_top_rows.sql; its filters are
-- applied as it draws), in manager then list order.
SELECT * FROM top_rows
ORDER BY manager_id, sort_key
