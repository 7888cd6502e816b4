-- The owning serve claims a pending command before carrying it out, so it runs once and a
-- requester can no longer withdraw it.
UPDATE commands SET state = 'running' WHERE id = ?1 AND state = 'pending'
