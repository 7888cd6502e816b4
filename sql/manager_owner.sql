-- The serve that owns a manager (it resumes the manager's closed threads), by primary key.
SELECT {manager_owner_row} FROM managers WHERE id = ?1
