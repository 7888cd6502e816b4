-- The first threads of a manager in list order, for the unknown-reference error text.
SELECT id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd, args, status,
       phase, agent_state, exit_kind, exit_code, exit_signal, exit_message, archived, hidden,
       session_file, session_id, pid, pgid, owner_pid, last_seq, created_at, last_event_at
FROM threads
WHERE manager_id = ?1 ORDER BY sort_key LIMIT ?2
