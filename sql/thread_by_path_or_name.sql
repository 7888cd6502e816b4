-- Reference resolution steps 2 and 3 as one statement, so they share one read transaction: the
-- thread at the path (the UNIQUE (manager_id, path) index), then the threads whose task name
-- equals the text in list order (threads_by_task_name; LIMIT bounds an ambiguity report). The
-- last column tells the two apart; `refs::resolve` stops reading at a path match, so the name
-- lookup only runs when the path misses.
SELECT id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd, args, status,
       phase, agent_state, exit_kind, exit_code, exit_signal, exit_message, archived, hidden,
       session_file, session_id, pid, pgid, owner_pid, last_seq, created_at, last_event_at,
       1 AS by_path
FROM threads
WHERE manager_id = ?1 AND path = ?2
UNION ALL
SELECT * FROM (
    SELECT id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd, args,
           status, phase, agent_state, exit_kind, exit_code, exit_signal, exit_message, archived,
           hidden, session_file, session_id, pid, pgid, owner_pid, last_seq, created_at,
           last_event_at, 0
    FROM threads
    WHERE manager_id = ?1 AND task_name = ?3 ORDER BY sort_key LIMIT ?4
)
