-- `list` with state live and `ancestor`: the live rows of one range of
-- threads_live_by_sort_key (:lo = key || '/', :hi = key || '0').
SELECT id, manager_id, path, parent_path, parent_id, task_name, name, depth, cwd, args, status,
       phase, agent_state, exit_kind, exit_code, exit_signal, exit_message, archived, hidden,
       session_file, session_id, pid, pgid, owner_pid, last_seq, created_at, last_event_at
FROM threads INDEXED BY threads_live_by_sort_key
WHERE manager_id = :manager AND status = 'live' AND sort_key > :lo AND sort_key < :hi
  AND (:visibility = 'all' OR archived = (:visibility = 'archived'))
ORDER BY sort_key
