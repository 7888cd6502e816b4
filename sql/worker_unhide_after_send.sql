-- Contract C, after a send is admitted: a reported worker is explicitly shown (override 0),
-- otherwise the override is removed.
UPDATE threads
SET hidden = CASE WHEN EXISTS (SELECT 1 FROM reports r WHERE r.worker_id = threads.id) THEN 0 END,
    updated_at = ?2
WHERE id = ?1
