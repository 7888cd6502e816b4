-- `threadbase host forget`: the managers owned by a serve of the forgotten host (?1) are owned by
-- nobody now, so the next serve that needs one (a resume of its closed threads) takes it over.
UPDATE managers
SET owner_pid = NULL, owner_started_at = NULL, host_id = NULL, boot_id = NULL
WHERE host_id = ?1
