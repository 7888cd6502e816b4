-- A thread and its descendants in spawn order: one range of threads_by_sort_key
-- (?2 = the thread's path, ?3/?4 = the descendant range of its sort key), sorted by rowid
-- (only that subtree's rows are sorted).
SELECT id, path, parent_path, agent_state, task, status_text, output, error, session_file,
       created_at, updated_at, status, owner_pid, owner_started_at, agent_pause_requested,
       agent_stop_requested, cwd, launch_seq, name,
       (SELECT input_tokens FROM thread_usage WHERE thread_id = threads.id),
       (SELECT output_tokens FROM thread_usage WHERE thread_id = threads.id),
       (SELECT cost_usd FROM thread_usage WHERE thread_id = threads.id)
FROM threads
WHERE manager_id = ?1 AND (path = ?2 OR (sort_key > ?3 AND sort_key < ?4))
ORDER BY rowid
