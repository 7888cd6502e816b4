-- sql/adopt_candidates.sql on PostgreSQL: `IS NOT ?2` (SQLite's null-safe inequality) is
-- IS DISTINCT FROM here.
SELECT t.id, t.status, m.session_id, m.session_file, m.owner_pid, m.owner_started_at,
       t.created_at
FROM threads t
JOIN managers m ON m.id = t.manager_id
WHERE (t.id = ?1 OR (t.sort_key = replace(?1, '_', '!') AND t.path = ?1))
  AND m.contract = 'thread' AND m.id IS DISTINCT FROM ?2
ORDER BY t.created_at DESC
LIMIT 20
