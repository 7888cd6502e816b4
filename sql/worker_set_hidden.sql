-- Contract C: sets (1/0) or removes (NULL) a worker's hidden override.
UPDATE threads SET hidden = ?2, updated_at = ?3 WHERE id = ?1
