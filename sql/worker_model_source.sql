-- Contract C: whether a worker's model is known yet, and the session file that records it.
SELECT model IS NOT NULL, session_file FROM threads WHERE id = ?1
