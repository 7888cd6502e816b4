-- `list` with `parent`: direct children of one path, already in list order (threads_by_parent).
-- Each row is the thread's id, path and status (store::list::listed_col). The rest of a thread
-- row is read only for the threads without an answer kept in the serve's memory
-- (engine/cache.rs; sql/threads_by_ids.sql): stepping the whole row cost 2k instructions a
-- listed thread.
SELECT {listed_row}
FROM threads t
WHERE manager_id = :manager AND parent_path = :parent
  AND (:state = 'all' OR status = :state)
  AND (:visibility = 'all' OR archived = (:visibility = 'archived'))
ORDER BY sort_key
