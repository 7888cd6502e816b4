-- Contract C: one worker with its report. The outcome is the stored one, else (a process
-- that closed before its first run ended, e.g. restored as stale) failed or interrupted.
SELECT t.id, t.coordinator_id, t.spawn_key, t.fingerprint, t.title, t.cwd, t.agent, t.model, t.args,
       CASE WHEN t.outcome IS NOT NULL THEN t.outcome
            WHEN t.status = 'closed' THEN CASE WHEN t.exit_kind = 'failed' THEN 'failed' ELSE 'interrupted' END
       END AS outcome,
       t.hidden, t.status, t.phase, t.session_file, t.owner_pid, t.owner_started_at,
       t.initial_message_id, t.report_message_id, t.parent_path, t.granted_paths,
       r.verdict, r.summary, r.evidence
FROM threads t LEFT JOIN reports r ON r.worker_id = t.id
WHERE t.id = ?1 AND t.coordinator_id IS NOT NULL AND t.spawn_key IS NOT NULL
