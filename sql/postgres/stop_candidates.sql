-- sql/stop_candidates.sql on PostgreSQL: a parameter first seen in `IS NULL` needs its type.
SELECT {stop_candidate_row}
FROM threads t JOIN managers m ON m.id = t.manager_id
WHERE t.status = 'live' AND (CAST(?1 AS text) IS NULL OR m.session_id = ?1)
ORDER BY t.sort_key, t.manager_id
