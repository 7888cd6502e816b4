-- `list` without parent/ancestor: a manager's threads in list order (threads_by_sort_key).
SELECT * FROM threads
WHERE manager_id = :manager
  AND (:state = 'all' OR status = :state)
  AND (:visibility = 'all' OR archived = (:visibility = 'archived'))
ORDER BY sort_key
