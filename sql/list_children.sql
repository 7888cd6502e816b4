-- `list` with `parent`: direct children of one path, already in list order (threads_by_parent).
SELECT * FROM threads
WHERE manager_id = :manager AND parent_path = :parent
  AND (:state = 'all' OR status = :state)
  AND (:visibility = 'all' OR archived = (:visibility = 'archived'))
ORDER BY sort_key
