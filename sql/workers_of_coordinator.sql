-- Contract C: every worker of one coordinator, hidden ones included, oldest first (a range of
-- the threads_by_spawn_key index; spawn_key IS NOT NULL lets the partial index serve).
SELECT t.id, t.coordinator_id, t.spawn_key, t.fingerprint, t.title, t.cwd, t.agent, t.model, t.args,
       CASE WHEN t.outcome IS NOT NULL THEN t.outcome
            WHEN t.status = 'closed' THEN CASE WHEN t.exit_kind = 'failed' THEN 'failed' ELSE 'interrupted' END
       END AS outcome,
       t.hidden, t.status, t.phase, t.session_file, t.owner_pid, t.owner_started_at,
       t.initial_message_id, t.report_message_id, t.parent_path, t.granted_paths,
       r.verdict, r.summary, r.evidence
FROM threads t LEFT JOIN reports r ON r.worker_id = t.id
WHERE t.coordinator_id = ?1 AND t.spawn_key IS NOT NULL
ORDER BY t.created_at, t.id
