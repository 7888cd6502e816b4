-- `threadbase check`: every live thread with its process and its effective owner: the serve
-- recorded on the row, else (a reserved row whose launch is in flight) the manager's serve;
-- age_s is the seconds since the row was created (NULL when created_at does not parse); the
-- child's start time pairs with its pid to tell it from a reused pid.
SELECT t.id, t.path, t.phase, t.pid,
       CASE WHEN t.owner_pid IS NOT NULL THEN t.owner_pid ELSE m.owner_pid END,
       CASE WHEN t.owner_pid IS NOT NULL THEN t.owner_started_at ELSE m.owner_started_at END,
       (julianday('now') - julianday(t.created_at)) * 86400.0,
       m.session_id, t.process_started_at
FROM threads t JOIN managers m ON m.id = t.manager_id
WHERE t.status = 'live'
  -- A queued row never launched (THREADBASE_QUEUE=1) claims no process: it waits for a slot.
  AND NOT (t.queued_at IS NOT NULL AND t.launch_seq = 0)
