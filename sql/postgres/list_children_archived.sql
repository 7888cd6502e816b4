-- sql/list_children_archived.sql on PostgreSQL: no unary + (SQLite's way to keep an index off a
-- column).
SELECT {listed_row}
FROM threads t
WHERE manager_id = :manager AND archived = 1 AND sort_key > :lo AND sort_key < :hi
  AND parent_path = :parent
  AND (:state = 'all' OR status = :state)
ORDER BY sort_key
