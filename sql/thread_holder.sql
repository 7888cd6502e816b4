-- Where a thread's process is: its status and the serve that holds it (a reserved row whose
-- launch is in flight has no owner of its own yet: its manager's serve, as in
-- restore_candidates.sql). Primary-key lookups of the thread and its manager.
SELECT t.status,
       CASE WHEN t.owner_pid IS NOT NULL THEN t.owner_pid ELSE m.owner_pid END,
       CASE WHEN t.owner_pid IS NOT NULL THEN t.owner_started_at ELSE m.owner_started_at END
FROM threads t JOIN managers m ON m.id = t.manager_id
WHERE t.id = ?1
