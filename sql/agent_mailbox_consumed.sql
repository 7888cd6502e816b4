-- A mailbox row is consumed: a steer seen in the child's transcript, or a notice handed to
-- the recipient. Only a pending row changes, so a second claim changes nothing.
UPDATE mailbox SET state = 'delivered', delivered_at = ?2 WHERE id = ?1 AND state = 'pending'
