-- `list` with state live and `parent`: the live rows below the parent (one range of
-- threads_live_by_sort_key, :lo/:hi = the parent's descendant range), kept if direct children.
-- With each row, its kept summary snapshot and list line (thread_snapshots, this build's
-- :shape), NULL when none is kept: one primary-key lookup per row.
SELECT id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd, args, status,
       phase, agent_state, exit_kind, exit_code, exit_signal, exit_message, archived, hidden,
       session_file, session_id, pid, pgid, owner_pid, last_seq, created_at, last_event_at,
       c.json, c.line
FROM threads INDEXED BY threads_live_by_sort_key
LEFT JOIN thread_snapshots c
  ON c.thread_id = threads.id AND c.view = 'snapshot' AND c.detail = 'summary' AND c.shape = :shape
WHERE manager_id = :manager AND status = 'live' AND sort_key > :lo AND sort_key < :hi
  AND parent_path = :parent
  AND (:visibility = 'all' OR archived = (:visibility = 'archived'))
ORDER BY sort_key
