-- Fills in a freshly reserved contract B thread's lifecycle fields and its owner (this serve).
UPDATE threads
SET status_text = :status, owner_pid = :owner_pid, owner_started_at = :owner_started,
    owner_host = :owner_host, owner_boot = :owner_boot, updated_at = :at
WHERE id = :id
