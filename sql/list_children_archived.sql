-- `list` with visibility archived and `parent`: the archived rows below the parent (one range
-- of threads_archived_by_sort_key, :lo/:hi = the parent's descendant range), kept if direct
-- children.
-- The unary `+` keeps threads_by_parent from serving `parent_path` so SQLite reads the partial index.
-- Each row is the thread's id, path and status (store::list::listed_col). The rest of a thread
-- row is read only for the threads without an answer kept in the serve's memory
-- (engine/cache.rs; sql/threads_by_ids.sql): stepping the whole row cost 2k instructions a
-- listed thread.
SELECT {listed_row}
FROM threads t
WHERE manager_id = :manager AND archived = 1 AND sort_key > :lo AND sort_key < :hi
  AND +parent_path = :parent
  AND (:state = 'all' OR status = :state)
ORDER BY sort_key
