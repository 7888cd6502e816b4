-- How a thread's process ended, in words: a run whose process ended before it settled fails
-- with this text (primary key).
SELECT exit_message FROM threads WHERE id = ?1
