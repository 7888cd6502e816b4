-- Every thread with its manager, for `threadbase top` (filters are applied in the view); a
-- contract C worker's outcome (as sql/workers_of_coordinator.sql reads it) and report verdict
-- give its list status (a primary-key lookup of reports per thread).
SELECT t.id, m.session_id, m.contract, t.path, t.parent_path, t.task_name, t.name, t.status,
       t.phase, t.agent_state, t.exit_kind, t.archived, t.hidden, t.created_at, t.last_event_at,
       t.owner_pid, t.owner_started_at,
       CASE WHEN t.outcome IS NOT NULL THEN t.outcome
            WHEN t.status = 'closed' THEN CASE WHEN t.exit_kind = 'failed' THEN 'failed' ELSE 'interrupted' END
       END AS outcome,
       r.verdict
FROM threads t JOIN managers m ON m.id = t.manager_id
LEFT JOIN reports r ON r.worker_id = t.id
ORDER BY m.id, t.sort_key
