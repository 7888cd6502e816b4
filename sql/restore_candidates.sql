-- Threads that claim a live process, with the process and its owner, for the restore pass
-- (the partial index threads_live holds exactly these rows).
SELECT t.id, t.manager_id, m.contract, t.pid, t.pgid, t.process_started_at, t.owner_pid, t.owner_started_at, t.launch_seq
FROM threads t JOIN managers m ON m.id = t.manager_id
WHERE t.status = 'live'
