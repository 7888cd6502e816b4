-- `list` with visibility archived, no parent/ancestor: only the manager's archived rows, in
-- list order (threads_archived_by_sort_key holds archived rows only).
-- With each row, its kept summary snapshot and list line (thread_snapshots, this build's
-- :shape), NULL when none is kept: one primary-key lookup per row.
SELECT id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd, args, status,
       phase, agent_state, exit_kind, exit_code, exit_signal, exit_message, archived, hidden,
       session_file, session_id, pid, pgid, owner_pid, last_seq, created_at, last_event_at,
       c.json, c.line
FROM threads INDEXED BY threads_archived_by_sort_key
LEFT JOIN thread_snapshots c
  ON c.thread_id = threads.id AND c.view = 'snapshot' AND c.detail = 'summary' AND c.shape = :shape
WHERE manager_id = :manager AND archived = 1
  AND (:state = 'all' OR status = :state)
ORDER BY sort_key
