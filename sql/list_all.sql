-- `list` without parent/ancestor: a manager's threads in list order (threads_by_sort_key).
-- With each row, its kept summary snapshot and list line (thread_snapshots, this build's
-- :shape), NULL when none is kept: one primary-key lookup per row.
SELECT id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd, args, status,
       phase, agent_state, exit_kind, exit_code, exit_signal, exit_message, archived, hidden,
       session_file, session_id, pid, pgid, owner_pid, last_seq, created_at, last_event_at,
       c.json, c.line
FROM threads
LEFT JOIN thread_snapshots c
  ON c.thread_id = threads.id AND c.view = 'snapshot' AND c.detail = 'summary' AND c.shape = :shape
WHERE manager_id = :manager
  AND (:state = 'all' OR status = :state)
  AND (:visibility = 'all' OR archived = (:visibility = 'archived'))
ORDER BY sort_key
