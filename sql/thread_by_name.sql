-- Reference resolution step 3: threads whose task name (always the path basename) equals the
-- text, in list order; LIMIT keeps an ambiguity report bounded.
SELECT id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd, args, status,
       phase, agent_state, exit_kind, exit_code, exit_signal, exit_message, archived, hidden,
       session_file, session_id, pid, pgid, owner_pid, last_seq, created_at, last_event_at
FROM threads
WHERE manager_id = ?1 AND task_name = ?2 ORDER BY sort_key LIMIT ?3
