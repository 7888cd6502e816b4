-- `list` with visibility archived, no parent/ancestor: only the manager's archived rows, in
-- list order (threads_archived_by_sort_key holds archived rows only).
SELECT id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd, args, status,
       phase, agent_state, exit_kind, exit_code, exit_signal, exit_message, archived, hidden,
       session_file, session_id, pid, pgid, owner_pid, last_seq, created_at, last_event_at
FROM threads INDEXED BY threads_archived_by_sort_key
WHERE manager_id = :manager AND archived = 1
  AND (:state = 'all' OR status = :state)
ORDER BY sort_key
