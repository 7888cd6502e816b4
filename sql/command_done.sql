-- Records the outcome of a control request.
UPDATE commands SET state = ?2, result = ?3, done_at = ?4 WHERE id = ?1 AND state = 'pending'
