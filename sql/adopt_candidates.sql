-- `threadbase adopt REF` and a `resume` that adopts (contract A): the threads of the other
-- contract A managers whose id is ?1 (primary key) or whose canonical path is ?1
-- (threads_global_sort: sort_key is a function of the path), with their manager's session,
-- session file and owner, newest first. ?2 is the adopting manager (NULL: none yet).
SELECT {adopt_candidate_row}
FROM threads t
JOIN managers m ON m.id = t.manager_id
WHERE (t.id = ?1 OR (t.sort_key = replace(?1, '_', '!') AND t.path = ?1))
  AND m.contract = 'thread' AND m.id IS NOT ?2
ORDER BY t.created_at DESC
LIMIT 20
