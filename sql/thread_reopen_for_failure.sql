-- Lets a spawn failure be recorded as the close of the current launch (a closed row that is
-- relaunched and fails to spawn is briefly live again inside the same transaction).
UPDATE threads SET status = 'live' WHERE id = ?1 AND status = 'closed'
