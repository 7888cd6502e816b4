-- `list` with visibility archived and `ancestor`: the archived rows of one range of
-- threads_archived_by_sort_key (:lo = key || '/', :hi = key || '0').
-- With each row, its kept summary snapshot and list line (thread_snapshots, this build's
-- :shape), NULL when none is kept: one primary-key lookup per row.
SELECT t.*, c.json, c.line
FROM thread_rows t
LEFT JOIN thread_snapshots c
  ON c.thread_id = t.id AND c.view = 'snapshot' AND c.detail = 'summary' AND c.shape = :shape
WHERE manager_id = :manager AND archived = 1 AND sort_key > :lo AND sort_key < :hi
  AND (:state = 'all' OR status = :state)
ORDER BY sort_key
