-- `threadbase top` showing one subtree: the thread at a path (:key, its sort key) and every
-- thread below it (:lo < sort_key < :hi, paths::descendant_range), in every manager, with the
-- columns and in the order of sql/top_threads.sql. One range of threads_by_sort_key per
-- manager: CROSS JOIN reads the managers first (else SQLite walks threads_global_sort and
-- sorts what it found).
SELECT t.id, m.session_id, m.contract, t.path, t.parent_path, t.task_name, t.name, t.status,
       t.phase, t.agent_state, t.exit_kind, t.archived, t.hidden, t.created_at, t.last_event_at,
       t.owner_pid, t.owner_started_at,
       CASE WHEN t.outcome IS NOT NULL THEN t.outcome
            WHEN t.status = 'closed' THEN CASE WHEN t.exit_kind = 'failed' THEN 'failed' ELSE 'interrupted' END
       END AS outcome,
       r.verdict
FROM managers m CROSS JOIN threads t ON t.manager_id = m.id
LEFT JOIN reports r ON r.worker_id = t.id
WHERE t.sort_key >= :key AND t.sort_key < :hi AND (t.sort_key = :key OR t.sort_key > :lo)
ORDER BY m.id, t.sort_key
