-- Every thread of a registry in spawn order (rowid order; threads_agent_by_manager holds the
-- rowids of one registry's contract B threads in order, so there is no sort step).
SELECT id, path, parent_path, agent_state, task, status_text, output, error, session_file,
       created_at, updated_at, status, owner_pid, owner_started_at, agent_pause_requested,
       agent_stop_requested, cwd, launch_seq, name,
       (SELECT input_tokens FROM thread_usage WHERE thread_id = threads.id) AS input_tokens,
       (SELECT output_tokens FROM thread_usage WHERE thread_id = threads.id) AS output_tokens,
       (SELECT cost_usd FROM thread_usage WHERE thread_id = threads.id) AS cost_usd
FROM threads WHERE manager_id = ?1 AND agent_state IS NOT NULL ORDER BY rowid
