-- The requester gives up on a command nobody has claimed yet; once claimed (running) it is
-- the owner's to finish, so this changes nothing.
UPDATE commands SET state = 'failed', result = ?2, done_at = ?3 WHERE id = ?1 AND state = 'pending'
