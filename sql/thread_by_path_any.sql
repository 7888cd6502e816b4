-- Threads at one path in any manager, for the inspection CLI (threads_global_sort index on
-- sort_key, which is a function of path).
SELECT id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd, args, status,
       phase, agent_state, exit_kind, exit_code, exit_signal, exit_message, archived, hidden,
       session_file, session_id, pid, pgid, owner_pid, last_seq, created_at, last_event_at
FROM threads
WHERE sort_key = replace(?1, '_', '!') AND path = ?1 ORDER BY manager_id LIMIT ?2
