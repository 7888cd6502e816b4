-- `list` with state live and `ancestor`: the live rows of one range of
-- threads_live_by_sort_key (:lo = key || '/', :hi = key || '0').
-- Each row is the thread's id, path and status (store::list::LISTED_*); the rest of a listed
-- thread's row is read a batch at a time (sql/threads_by_ids.sql) when the list renders it, so
-- counting a list steps no more than these three columns.
SELECT t.id, t.path, t.status
FROM thread_rows t
WHERE manager_id = :manager AND status = 'live' AND sort_key > :lo AND sort_key < :hi
  AND (:visibility = 'all' OR archived = (:visibility = 'archived'))
ORDER BY sort_key
