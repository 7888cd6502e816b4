-- Contract C: how the worker's last run ended (succeeded, failed, interrupted).
UPDATE threads SET outcome = ?2, updated_at = ?3 WHERE id = ?1
