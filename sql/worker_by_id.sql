-- Contract C: one worker with its report (sql/view_worker_rows.sql), by primary key.
SELECT * FROM worker_rows
WHERE id = ?1 AND coordinator_id IS NOT NULL AND spawn_key IS NOT NULL
