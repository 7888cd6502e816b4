-- sql/host_heartbeat.sql on PostgreSQL: the server's clock_timestamp() in the same ISO text
-- (UTC, milliseconds, 'Z') for SQLite's strftime.
INSERT INTO host_serves (host_id, boot_id, pid, started_at, first_at, heartbeat_at, pid_ns,
                         gap_from, resumed_at, degraded_since, degraded_reason)
VALUES (:host, :boot, :pid, :started,
        to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), :pid_ns,
        CAST(:gap_from AS TEXT),
        CASE WHEN CAST(:gap_from AS TEXT) IS NULL THEN NULL
             ELSE to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') END,
        CAST(:degraded_since AS TEXT), CAST(:degraded_reason AS TEXT))
ON CONFLICT (host_id, boot_id, pid, started_at) DO UPDATE
SET heartbeat_at = excluded.heartbeat_at, pid_ns = excluded.pid_ns,
    gap_from = coalesce(excluded.gap_from, host_serves.gap_from),
    resumed_at = coalesce(excluded.resumed_at, host_serves.resumed_at),
    degraded_since = excluded.degraded_since, degraded_reason = excluded.degraded_reason
RETURNING heartbeat_at
