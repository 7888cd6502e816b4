-- Contract C role check: whether a session id is itself a managed worker.
SELECT EXISTS (SELECT 1 FROM threads WHERE id = ?1 AND coordinator_id IS NOT NULL)
