-- A thread's ancestors by parent link (threads.parent_id, across managers: a child's own
-- serve records its self thread as the parent of its children), the top first; one
-- primary-key lookup per level, bounded.
WITH RECURSIVE up (id, n) AS (
    SELECT parent_id, 1 FROM threads WHERE id = ?1
    UNION ALL
    SELECT t.parent_id, up.n + 1 FROM up JOIN threads t ON t.id = up.id
    WHERE up.n < 64
)
SELECT t.id, t.manager_id, t.path, t.parent_path, t.parent_id, t.task_name, t.name, t.depth, t.cwd,
       t.args, t.status, t.phase, t.agent_state, t.exit_kind, t.exit_code, t.exit_signal,
       t.exit_message, t.archived, t.hidden, t.session_file, t.session_id, t.pid, t.pgid,
       t.owner_pid, t.last_seq, t.created_at, t.last_event_at
FROM up CROSS JOIN threads t ON t.id = up.id
ORDER BY up.n DESC
