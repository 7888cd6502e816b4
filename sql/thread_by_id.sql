-- Reference resolution step 1: an exact thread id within one manager (primary key lookup).
SELECT id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd, args, status,
       phase, agent_state, exit_kind, exit_code, exit_signal, exit_message, archived, hidden,
       session_file, session_id, pid, pgid, owner_pid, last_seq, created_at, last_event_at
FROM threads
WHERE id = ?1 AND manager_id = ?2
