-- sql/list_children_live.sql on PostgreSQL: a comparison is a boolean here, not the integer
-- `archived` holds; no unary + (SQLite's way to keep an index off a column).
SELECT {listed_row}
FROM threads t
WHERE manager_id = :manager AND status = 'live' AND sort_key > :lo AND sort_key < :hi
  AND parent_path = :parent
  AND (:visibility = 'all' OR archived = CASE WHEN :visibility = 'archived' THEN 1 ELSE 0 END)
ORDER BY sort_key
