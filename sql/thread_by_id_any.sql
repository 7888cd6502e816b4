-- A thread by id in any manager (primary key lookup); for the inspection CLI.
SELECT {thread_row}
FROM threads t
WHERE id = ?1
