-- A thread's phase before a batch changes it (the ingest writer tells a settle, busy to idle,
-- from other idle changes). Primary key.
SELECT phase FROM threads WHERE id = ?1
