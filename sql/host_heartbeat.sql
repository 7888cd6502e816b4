-- A serve's heartbeat (issue 33): its row in host_serves, made or refreshed with the database's
-- clock (not the host's), so that every host judges leases by one clock.
INSERT INTO host_serves (host_id, boot_id, pid, started_at, first_at, heartbeat_at)
VALUES (:host, :boot, :pid, :started,
        strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
ON CONFLICT (host_id, boot_id, pid, started_at) DO UPDATE SET heartbeat_at = excluded.heartbeat_at
