-- The still threads (closed, or live and idle) among the ids in the JSON array ?1, in the
-- array's order (the snapshot cache's filler renders only those): a primary-key lookup per id.
SELECT t.id, t.manager_id, t.path, t.parent_path, t.parent_id, t.task_name, t.name, t.depth,
       t.cwd, t.args, t.status, t.phase, t.agent_state, t.exit_kind, t.exit_code, t.exit_signal,
       t.exit_message, t.archived, t.hidden, t.session_file, t.session_id, t.pid, t.pgid,
       t.owner_pid, t.last_seq, t.created_at, t.last_event_at
FROM json_each(?1) AS j
JOIN threads AS t ON t.id = j.value
WHERE t.status = 'closed' OR t.phase = 'idle'
ORDER BY j.key
