-- Closes a reserved thread whose process never started (no pid recorded) as failed.
UPDATE threads SET status = 'closed', phase = 'failed', exit_kind = 'failed', exit_message = ?2, updated_at = ?3
WHERE id = ?1 AND status = 'live' AND pid IS NULL
