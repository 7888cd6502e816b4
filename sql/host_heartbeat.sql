-- A serve's heartbeat (issue 33): its row in host_serves, made or refreshed with the database's
-- clock (not the host's), so that every host judges leases by one clock. With it the serve's PID
-- space (:pid_ns) and, on the first heartbeat after some failed (issue 46), when its heartbeats
-- last succeeded before (:gap_from); the database's clock then says when they resumed. Since
-- V21, whether its supervision (the row watcher) is not running: since when by the serve's
-- clock and why (:degraded_since, :degraded_reason; NULL while it runs, which clears them).
-- Returns the heartbeat's time, which the serve keeps as its last success.
INSERT INTO host_serves (host_id, boot_id, pid, started_at, first_at, heartbeat_at, pid_ns,
                         gap_from, resumed_at, degraded_since, degraded_reason)
VALUES (:host, :boot, :pid, :started,
        strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), :pid_ns,
        CAST(:gap_from AS TEXT),
        CASE WHEN CAST(:gap_from AS TEXT) IS NULL THEN NULL
             ELSE strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END,
        CAST(:degraded_since AS TEXT), CAST(:degraded_reason AS TEXT))
ON CONFLICT (host_id, boot_id, pid, started_at) DO UPDATE
SET heartbeat_at = excluded.heartbeat_at, pid_ns = excluded.pid_ns,
    gap_from = coalesce(excluded.gap_from, host_serves.gap_from),
    resumed_at = coalesce(excluded.resumed_at, host_serves.resumed_at),
    degraded_since = excluded.degraded_since, degraded_reason = excluded.degraded_reason
RETURNING heartbeat_at
