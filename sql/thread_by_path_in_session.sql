-- Threads at one path in any manager of one root session's tree (`--session`), for the
-- inspection CLI: threads_global_sort on sort_key (a function of path), then a thread_places
-- primary-key lookup per hit.
SELECT {thread_row}
FROM threads t
WHERE t.sort_key = replace(?1, '_', '!') AND t.path = ?1
  AND EXISTS (SELECT 1 FROM thread_places p WHERE p.thread_id = t.id AND p.root_session = ?2)
ORDER BY t.manager_id LIMIT ?3
