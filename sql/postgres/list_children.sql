-- sql/list_children.sql on PostgreSQL: a comparison is a boolean here, not the integer
-- `archived` holds.
SELECT {listed_row}
FROM threads t
WHERE manager_id = :manager AND parent_path = :parent
  AND (:state = 'all' OR status = :state)
  AND (:visibility = 'all' OR archived = CASE WHEN :visibility = 'archived' THEN 1 ELSE 0 END)
ORDER BY sort_key
