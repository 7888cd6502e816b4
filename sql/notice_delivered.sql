-- Claims one pending notice for delivery; only the claim that changes the row may emit it.
UPDATE mailbox SET state = 'delivered', delivered_at = ?2 WHERE id = ?1 AND state = 'pending'
