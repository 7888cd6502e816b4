-- Where a thread's process is: its status and the serve that holds it (a reserved row whose
-- launch is in flight has no owner of its own yet: its manager's serve, as in
-- restore_candidates.sql). Primary-key lookups of the thread and its manager.
SELECT {thread_holder_row}
FROM threads t JOIN managers m ON m.id = t.manager_id
WHERE t.id = ?1
