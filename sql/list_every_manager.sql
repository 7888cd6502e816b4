-- Every thread of every manager in list order, for `threadbase list` / `tree`.
SELECT {thread_row}
FROM threads t
WHERE (:state = 'all' OR status = :state)
  AND (:visibility = 'all' OR archived = (:visibility = 'archived'))
ORDER BY sort_key, manager_id
