-- A thread by id in any manager (primary key lookup); for the inspection CLI.
SELECT * FROM thread_rows
WHERE id = ?1
