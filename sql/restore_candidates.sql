-- Threads that claim a live process, with the process and its owner, for the restore pass
-- (the partial index threads_live holds exactly these rows). A reserved row whose launch is in
-- flight has no owner of its own yet: its owner is its manager's serve, so a restore pass run
-- by another process meanwhile leaves it alone while that serve lives.
SELECT {restore_candidate_row}
FROM threads t JOIN managers m ON m.id = t.manager_id
WHERE t.status = 'live'
  -- A queued row never launched has no process to restore: the next serve of its manager
  -- launches it (THREADBASE_QUEUE=1).
  AND NOT (t.queued_at IS NOT NULL AND t.launch_seq = 0)
