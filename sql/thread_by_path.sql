-- Reference resolution step 2: an exact canonical path within one manager
-- (the UNIQUE (manager_id, path) index).
SELECT id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd, args, status,
       phase, agent_state, exit_kind, exit_code, exit_signal, exit_message, archived, hidden,
       session_file, session_id, pid, pgid, owner_pid, last_seq, created_at, last_event_at
FROM threads
WHERE manager_id = ?1 AND path = ?2
