-- Fills in a freshly reserved contract B thread's lifecycle fields and its owner (this serve).
UPDATE threads
SET status_text = :status, owner_pid = :owner_pid, owner_started_at = :owner_started,
    host_id = :host_id, boot_id = :boot_id, updated_at = :at
WHERE id = :id
