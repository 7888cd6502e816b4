-- Contract C (threads.snapshot / threads.restore): the workers of the coordinators in the JSON
-- array ?1, oldest first; one index range per coordinator.
SELECT t.id, t.coordinator_id, t.spawn_key, t.fingerprint, t.title, t.cwd, t.agent, t.model, t.args,
       CASE WHEN t.outcome IS NOT NULL THEN t.outcome
            WHEN t.status = 'closed' THEN CASE WHEN t.exit_kind = 'failed' THEN 'failed' ELSE 'interrupted' END
       END AS outcome,
       t.hidden, t.status, t.phase, t.session_file, t.owner_pid, t.owner_started_at,
       t.initial_message_id, t.report_message_id, t.parent_path, t.granted_paths,
       r.verdict, r.summary, r.evidence
FROM threads t LEFT JOIN reports r ON r.worker_id = t.id
WHERE t.coordinator_id IN (SELECT value FROM json_each(?1)) AND t.spawn_key IS NOT NULL
ORDER BY t.created_at, t.id
