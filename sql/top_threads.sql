-- Every thread with its manager, for `threadbase top` (filters are applied in the view).
SELECT t.id, m.session_id, m.contract, t.path, t.parent_path, t.task_name, t.name, t.status,
       t.phase, t.agent_state, t.exit_kind, t.archived, t.hidden, t.created_at, t.last_event_at,
       t.owner_pid, t.owner_started_at
FROM threads t JOIN managers m ON m.id = t.manager_id
ORDER BY m.id, t.sort_key
