-- `list` without parent/ancestor: a manager's threads in list order (threads_by_sort_key).
SELECT id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd, args, status,
       phase, agent_state, exit_kind, exit_code, exit_signal, exit_message, archived, hidden,
       session_file, session_id, pid, pgid, owner_pid, last_seq, created_at, last_event_at
FROM threads
WHERE manager_id = :manager
  AND (:state = 'all' OR status = :state)
  AND (:visibility = 'all' OR archived = (:visibility = 'archived'))
ORDER BY sort_key
