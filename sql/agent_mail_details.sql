-- A contract B notice's structured details (a timeout's timeoutMs and recentOutput), by the
-- mailbox row's key.
UPDATE mailbox SET details = :details WHERE id = :id
