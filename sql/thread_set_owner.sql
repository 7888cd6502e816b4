-- Records the serve that reserved a thread as its holder before its launch (a contract C worker:
-- another serve of the same coordinator that spawns the same key at once sees it held and
-- leaves the launch to it). Launched records the holder again (sql/thread_launched.sql).
UPDATE threads
SET owner_pid = :owner_pid, owner_started_at = :owner_started, host_id = :host_id,
    boot_id = :boot_id
WHERE id = :id
