-- sql/adopt_candidates.sql on PostgreSQL: `IS NOT ?2` (SQLite's null-safe inequality) is
-- IS DISTINCT FROM here.
SELECT {adopt_candidate_row}
FROM threads t
JOIN managers m ON m.id = t.manager_id
WHERE (t.id = ?1 OR (t.sort_key = replace(?1, '_', '!') AND t.path = ?1))
  AND m.contract = 'thread' AND m.id IS DISTINCT FROM ?2
ORDER BY t.created_at DESC
LIMIT 20
