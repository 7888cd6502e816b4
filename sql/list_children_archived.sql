-- `list` with visibility archived and `parent`: the archived rows below the parent (one range
-- of threads_archived_by_sort_key, :lo/:hi = the parent's descendant range), kept if direct
-- children.
-- The unary `+` keeps threads_by_parent from serving `parent_path` (a view takes no
-- INDEXED BY), so SQLite reads the partial index.
-- Each row is the thread's id, path and status (store::list::LISTED_*); the rest of a listed
-- thread's row is read a batch at a time (sql/threads_by_ids.sql) when the list renders it, so
-- counting a list steps no more than these three columns.
SELECT t.id, t.path, t.status
FROM thread_rows t
WHERE manager_id = :manager AND archived = 1 AND sort_key > :lo AND sort_key < :hi
  AND +parent_path = :parent
  AND (:state = 'all' OR status = :state)
ORDER BY sort_key
