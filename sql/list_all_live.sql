-- `list` with state live, no parent/ancestor: only the manager's live rows, already in list
-- order (threads_live_by_sort_key holds live rows only), so closed threads cost nothing.
-- With each row, its kept summary snapshot and list line (thread_snapshots, this build's
-- :shape), NULL when none is kept: one primary-key lookup per row.
SELECT t.*, c.json, c.line
FROM thread_rows t
LEFT JOIN thread_snapshots c
  ON c.thread_id = t.id AND c.view = 'snapshot' AND c.detail = 'summary' AND c.shape = :shape
WHERE manager_id = :manager AND status = 'live'
  AND (:visibility = 'all' OR archived = (:visibility = 'archived'))
ORDER BY sort_key
