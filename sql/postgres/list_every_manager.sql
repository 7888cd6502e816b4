-- sql/list_every_manager.sql on PostgreSQL: a comparison is a boolean here, not the integer
-- `archived` holds.
SELECT {thread_row}
FROM threads t
WHERE (:state = 'all' OR status = :state)
  AND (:visibility = 'all' OR archived = CASE WHEN :visibility = 'archived' THEN 1 ELSE 0 END)
ORDER BY sort_key, manager_id
