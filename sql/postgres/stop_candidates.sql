-- sql/stop_candidates.sql on PostgreSQL: a parameter first seen in `IS NULL` needs its type.
SELECT t.id, t.path, m.session_id,
       CASE WHEN t.queued_at IS NOT NULL AND t.launch_seq = 0 THEN m.owner_pid ELSE t.owner_pid END AS owner_pid,
       CASE WHEN t.queued_at IS NOT NULL AND t.launch_seq = 0 THEN m.owner_started_at
            ELSE t.owner_started_at END AS owner_started_at
FROM threads t JOIN managers m ON m.id = t.manager_id
WHERE t.status = 'live' AND (CAST(?1 AS text) IS NULL OR m.session_id = ?1)
ORDER BY t.sort_key, t.manager_id
