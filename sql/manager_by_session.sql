-- A manager by its session id and contract (the UNIQUE index answers it).
SELECT id FROM managers WHERE session_id = ?1 AND contract = ?2
