-- `list` with visibility archived, no parent/ancestor: only the manager's archived rows, in
-- list order (threads_archived_by_sort_key holds archived rows only).
-- Each row is the thread's id, path and status (store::list::listed_col). The rest of a thread
-- row is read only for the threads without an answer kept in the serve's memory
-- (engine/cache.rs; sql/threads_by_ids.sql): stepping the whole row cost 2k instructions a
-- listed thread.
SELECT {listed_row}
FROM threads t
WHERE manager_id = :manager AND archived = 1
  AND (:state = 'all' OR status = :state)
ORDER BY sort_key
