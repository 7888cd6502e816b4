-- The serve rows of this host (:host) that no serve refreshes any more: those of an earlier boot,
-- and those whose heartbeat is older than :secs seconds (a serve that died without removing its
-- row). Run with each heartbeat; host_serves' primary key starts with the host.
DELETE FROM host_serves
WHERE host_id = :host
  AND (boot_id <> :boot OR julianday(heartbeat_at) < julianday('now') - :secs / 86400.0)
