-- Every thread with its manager and what it spent, for `threadbase top` (filters are applied
-- in the view).
SELECT t.id, m.session_id, m.contract, t.path, t.parent_path, t.task_name, t.name, t.status,
       t.phase, t.agent_state, t.exit_kind, t.archived, t.hidden, t.created_at, t.last_event_at,
       t.owner_pid, t.owner_started_at,
       u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens, u.cost_usd
FROM threads t JOIN managers m ON m.id = t.manager_id
LEFT JOIN thread_usage u ON u.thread_id = t.id
ORDER BY m.id, t.sort_key
