-- The serve that owns a manager (it resumes the manager's closed threads), by primary key.
SELECT owner_pid, owner_started_at FROM managers WHERE id = ?1
