-- sql/list_descendants_live.sql on PostgreSQL: a comparison is a boolean here, not the integer
-- `archived` holds.
SELECT {listed_row}
FROM threads t
WHERE manager_id = :manager AND status = 'live' AND sort_key > :lo AND sort_key < :hi
  AND (:visibility = 'all' OR archived = CASE WHEN :visibility = 'archived' THEN 1 ELSE 0 END)
ORDER BY sort_key
