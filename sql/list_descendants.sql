-- `list` with `ancestor`: every thread below a path as one range scan of threads_by_sort_key
-- (:lo = key || '/', :hi = key || '0'); never LIKE, which would scan.
SELECT * FROM threads
WHERE manager_id = :manager AND sort_key > :lo AND sort_key < :hi
  AND (:state = 'all' OR status = :state)
  AND (:visibility = 'all' OR archived = (:visibility = 'archived'))
ORDER BY sort_key
