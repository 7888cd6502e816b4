-- A thread and its descendants in spawn (rowid) order: the thread by the UNIQUE
-- (manager_id, path) index and one range of threads_by_sort_key (?2 = the thread's path,
-- ?3/?4 = the descendant range of its sort key) into a rowid list, read back in order.
SELECT id, path, parent_path, agent_state, task, status_text, output, error, session_file,
       created_at, updated_at, status, owner_pid, owner_started_at, agent_pause_requested,
       agent_stop_requested, cwd, launch_seq, name,
       (SELECT input_tokens FROM thread_usage WHERE thread_id = threads.id) AS input_tokens,
       (SELECT output_tokens FROM thread_usage WHERE thread_id = threads.id) AS output_tokens,
       (SELECT cost_usd FROM thread_usage WHERE thread_id = threads.id) AS cost_usd
FROM threads
WHERE rowid IN (
    SELECT rowid FROM threads WHERE manager_id = ?1 AND path = ?2
    UNION ALL
    SELECT rowid FROM threads WHERE manager_id = ?1 AND sort_key > ?3 AND sort_key < ?4
)
ORDER BY rowid
