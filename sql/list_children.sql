-- `list` with `parent`: direct children of one path, already in list order (threads_by_parent).
-- Each row is the thread's id, path and status (store::list::listed_col) and its kept summary
-- snapshot and list line (thread_snapshots, this build's :shape), NULL when none is kept: one
-- primary-key lookup per row. The rest of a thread row is read only for the threads without
-- one (sql/threads_by_ids.sql): stepping the whole row cost 2k instructions a listed thread.
SELECT {listed_row}
FROM threads t
LEFT JOIN thread_snapshots c
  ON c.thread_id = t.id AND c.view = 'snapshot' AND c.detail = 'summary' AND c.shape = :shape
WHERE manager_id = :manager AND parent_path = :parent
  AND (:state = 'all' OR status = :state)
  AND (:visibility = 'all' OR archived = (:visibility = 'archived'))
ORDER BY sort_key
