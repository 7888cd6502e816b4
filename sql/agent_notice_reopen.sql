-- A settlement notice written delivered for a request that then did not report it (it read
-- the thread just before it settled) is due after all (by primary key).
UPDATE mailbox SET state = 'pending', delivered_at = NULL
WHERE id = ?1 AND state = 'delivered' AND direction = 'to_parent'
