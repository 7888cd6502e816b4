-- A thread by id in any manager (primary key lookup); for the inspection CLI.
SELECT * FROM threads WHERE id = ?1
