-- Contract C: a worker with its report (store::workers::WorkerRow, read by name), once for
-- sql/worker_by_id.sql and sql/workers_of_coordinator{,s}.sql. The outcome is the stored one,
-- else (a process that closed before its first run ended, e.g. restored as stale) failed or
-- interrupted. Last comes `created_at`, the queries' sort key, which WorkerRow does not read.
-- Rows of every thread: the queries keep workers (spawn_key IS NOT NULL, which also lets the
-- partial threads_by_spawn_key index serve). A TEMP view, made by every connection the store
-- opens (store::create_views).
CREATE TEMP VIEW worker_rows AS
SELECT t.id, t.coordinator_id, t.spawn_key, t.fingerprint, t.title, t.cwd, t.agent, t.model, t.args,
       CASE WHEN t.outcome IS NOT NULL THEN t.outcome
            WHEN t.status = 'closed' THEN CASE WHEN t.exit_kind = 'failed' THEN 'failed' ELSE 'interrupted' END
       END AS outcome,
       t.hidden, t.status, t.phase, t.session_file, t.owner_pid, t.owner_started_at,
       t.initial_message_id, t.report_message_id, t.parent_path, t.granted_paths,
       r.verdict, r.summary, r.evidence, t.created_at
FROM threads t LEFT JOIN reports r ON r.worker_id = t.id
