-- Threads with one task name in any manager of one root session's tree (`--session`), for
-- the inspection CLI; a thread_places primary-key lookup per thread of that name.
SELECT {thread_row}
FROM threads t
WHERE t.task_name = ?1
  AND EXISTS (SELECT 1 FROM thread_places p WHERE p.thread_id = t.id AND p.root_session = ?2)
ORDER BY t.sort_key, t.manager_id LIMIT ?3
