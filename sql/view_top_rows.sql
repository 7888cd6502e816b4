-- `threadbase top`'s thread row (cli::top::data reads it by position), once for
-- sql/top_threads.sql and sql/top_threads_under.sql: every thread with its manager; a contract C
-- worker's outcome (as sql/view_worker_rows.sql computes it) and report verdict give its list
-- status (a primary-key lookup of reports per thread); the exit's code and whether a signal
-- ended it make `closed/failed` (domain::state_words). Last come the keys those queries filter
-- and sort by, which top does not read: `manager_id` (m.id) and `sort_key`. CROSS JOIN reads
-- the managers first, so a subtree is one range of threads_by_sort_key per manager (else SQLite
-- walks threads_global_sort and sorts what it found). A TEMP view, made by every connection the
-- store opens (store::create_views).
CREATE TEMP VIEW top_rows AS
SELECT t.id, m.session_id, m.contract, t.path, t.parent_path, t.task_name, t.name, t.status,
       t.phase, t.agent_state, t.exit_kind, t.archived, t.hidden, t.created_at, t.last_event_at,
       t.owner_pid, t.owner_started_at,
       CASE WHEN t.outcome IS NOT NULL THEN t.outcome
            WHEN t.status = 'closed' THEN CASE WHEN t.exit_kind = 'failed' THEN 'failed' ELSE 'interrupted' END
       END AS outcome,
       r.verdict,
       t.exit_code, t.exit_signal IS NOT NULL AS signalled,
       m.id AS manager_id, t.sort_key
FROM managers m CROSS JOIN threads t ON t.manager_id = m.id
LEFT JOIN reports r ON r.worker_id = t.id
