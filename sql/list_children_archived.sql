-- `list` with visibility archived and `parent`: the archived rows below the parent (one range
-- of threads_archived_by_sort_key, :lo/:hi = the parent's descendant range), kept if direct
-- children.
-- The unary `+` keeps threads_by_parent from serving `parent_path` so SQLite reads the partial index.
-- Each row is the thread's id, path and status (store::list::listed_col) and its kept summary
-- snapshot and list line (thread_snapshots, this build's :shape), NULL when none is kept: one
-- primary-key lookup per row. The rest of a thread row is read only for the threads without
-- one (sql/threads_by_ids.sql): stepping the whole row cost 2k instructions a listed thread.
SELECT {listed_row}
FROM threads t
LEFT JOIN thread_snapshots c
  ON c.thread_id = t.id AND c.view = 'snapshot' AND c.detail = 'summary' AND c.shape = :shape
WHERE manager_id = :manager AND archived = 1 AND sort_key > :lo AND sort_key < :hi
  AND +parent_path = :parent
  AND (:state = 'all' OR status = :state)
ORDER BY sort_key
