-- Marks one message delivered right after the child accepted it.
UPDATE mailbox SET state = 'delivered', delivered_at = ?2 WHERE id = ?1 AND state = 'pending'
