-- `threadbase check`: every live thread with its process and its effective owner: the serve
-- recorded on the row, else (a reserved row whose launch is in flight) the manager's serve;
-- age_s is the seconds since the row was created (NULL when created_at does not parse); the
-- child's start time pairs with its pid to tell it from a reused pid.
SELECT {check_live_thread_row}
FROM threads t JOIN managers m ON m.id = t.manager_id
WHERE t.status = 'live'
  -- A queued row never launched (THREADBASE_QUEUE=1) claims no process: it waits for a slot.
  AND NOT (t.queued_at IS NOT NULL AND t.launch_seq = 0)
