-- `list` with visibility archived and `ancestor`: the archived rows of one range of
-- threads_archived_by_sort_key (:lo = key || '/', :hi = key || '0').
-- Each row is the thread's id, path and status (store::list::LISTED_*); the rest of a listed
-- thread's row is read a batch at a time (sql/threads_by_ids.sql) when the list renders it, so
-- counting a list steps no more than these three columns.
SELECT t.id, t.path, t.status
FROM thread_rows t
WHERE manager_id = :manager AND archived = 1 AND sort_key > :lo AND sort_key < :hi
  AND (:state = 'all' OR status = :state)
ORDER BY sort_key
