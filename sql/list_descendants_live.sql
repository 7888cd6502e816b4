-- `list` with state live and `ancestor`: the live rows of one range of
-- threads_live_by_sort_key (:lo = key || '/', :hi = key || '0').
-- Each row is the thread's id, path and status (store::list::listed_col). The rest of a thread
-- row is read only for the threads without an answer kept in the serve's memory
-- (engine/cache.rs; sql/threads_by_ids.sql): stepping the whole row cost 2k instructions a
-- listed thread.
SELECT {listed_row}
FROM threads t
WHERE manager_id = :manager AND status = 'live' AND sort_key > :lo AND sort_key < :hi
  AND (:visibility = 'all' OR archived = (:visibility = 'archived'))
ORDER BY sort_key
