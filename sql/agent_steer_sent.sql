-- A steering message was accepted by the child's launch :launch (not yet seen in its transcript).
UPDATE mailbox SET message_id = :launch WHERE id = :id AND state = 'pending'
