-- Contract B's thread row (store::agents::AgentRow, the columns of AGENT_COLUMNS in order),
-- once for sql/agent_thread*.sql, with what it spent (thread_usage, a primary-key lookup per
-- row). Last come the keys those queries filter and sort by, which AgentRow does not read:
-- `manager_id` (the registry) and `spawn_order` (the rowid: spawn order is rowid order).
-- A TEMP view, made by every connection the store opens (store::create_views).
CREATE TEMP VIEW agent_rows AS
SELECT id, path, parent_path, agent_state, task, status_text, output, error, session_file,
       created_at, updated_at, status, owner_pid, owner_started_at, agent_pause_requested,
       agent_stop_requested, cwd, launch_seq, name,
       (SELECT input_tokens FROM thread_usage WHERE thread_id = threads.id) AS input_tokens,
       (SELECT output_tokens FROM thread_usage WHERE thread_id = threads.id) AS output_tokens,
       (SELECT cost_usd FROM thread_usage WHERE thread_id = threads.id) AS cost_usd,
       agent_model, agent_thinking, agent_tools, agent_timeout_ms, agent_timeout_at,
       agent_reaped_at, manager_id, rowid AS spawn_order
FROM threads
