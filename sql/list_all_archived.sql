-- `list` with visibility archived, no parent/ancestor: only the manager's archived rows, in
-- list order (threads_archived_by_sort_key holds archived rows only).
-- Each row is the thread's id, path and status (store::list::LISTED_*); the rest of a listed
-- thread's row is read a batch at a time (sql/threads_by_ids.sql) when the list renders it, so
-- counting a list steps no more than these three columns.
SELECT t.id, t.path, t.status
FROM thread_rows t
WHERE manager_id = :manager AND archived = 1
  AND (:state = 'all' OR status = :state)
ORDER BY sort_key
