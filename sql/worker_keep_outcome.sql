-- Before a relaunch: a closed worker whose outcome was only derived (no run ended while it was
-- watched, e.g. restored as stale) keeps that outcome once its row is live again.
UPDATE threads
SET outcome = CASE WHEN exit_kind = 'failed' THEN 'failed' ELSE 'interrupted' END
WHERE id = ?1 AND status = 'closed' AND outcome IS NULL
