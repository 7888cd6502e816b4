-- Records the outcome of a control request (claimed, or still pending for the kinds carried
-- out at once).
UPDATE commands SET state = ?2, result = ?3, done_at = ?4 WHERE id = ?1 AND state IN ('pending', 'running')
