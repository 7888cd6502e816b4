-- A command claimed by a serve that died before finishing it: nothing will finish it.
UPDATE commands SET state = 'failed', result = ?2, done_at = ?3 WHERE id = ?1 AND state = 'running'
